"""Where a topology's files live on a host running its containers."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from heron_py.state.localfs import heron_home

TOPOLOGY_ID_ENV = "HERON_PY_TOPOLOGY_ID"


@dataclass(frozen=True)
class TopologyPaths:
    home: Path
    name: str

    @classmethod
    def of(cls, name: str, home: Path | None = None) -> TopologyPaths:
        return cls(home or heron_home(), name)

    @property
    def root(self) -> Path:
        return self.home / "topologies" / self.name

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def container(self, k: int) -> Path:
        return self.root / f"container-{k}"

    def container_logs(self, k: int) -> Path:
        return self.logs / f"container-{k}"


def stmgr_socket(port_file: Path) -> str:
    """The Unix socket where a container's stream manager serves its instances. Derived from
    the container's port file, so both sides find it without being told; kept short (a socket
    path has at most 107 bytes, a container folder in a deep home can have more)."""
    digest = hashlib.sha256(str(port_file.resolve()).encode()).hexdigest()[:20]
    return os.path.join(os.environ.get("XDG_RUNTIME_DIR") or "/tmp", f"heron-py-{digest}.sock")
