"""Where a topology's files live on a host running its containers."""

from __future__ import annotations

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
