"""State on the local file system, under ``$HERON_PY_HOME/state`` (default ~/.heron-py)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from heron_py.state.base import StateManager


def heron_home() -> Path:
    return Path(os.environ.get("HERON_PY_HOME", str(Path.home() / ".heron-py")))


class LocalFsStateManager(StateManager):
    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or heron_home()) / "state"

    def _path(self, kind: str, name: str) -> Path:
        if kind not in self.KINDS:
            raise ValueError(f"unknown state kind {kind!r}; expected one of {self.KINDS}")
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"bad topology name {name!r} for state {kind}")
        return self.root / kind / name

    def _put(self, kind: str, name: str, data: bytes, *, private: bool = False) -> None:
        path = self._path(kind, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        # write-then-rename so a reader never sees half a document
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{name}.")
        try:
            if private:
                os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _get(self, kind: str, name: str) -> bytes | None:
        try:
            return self._path(kind, name).read_bytes()
        except FileNotFoundError:
            return None

    def _delete(self, kind: str, name: str) -> None:
        self._path(kind, name).unlink(missing_ok=True)

    def _list(self, kind: str) -> list[str]:
        d = self.root / kind
        if not d.is_dir():
            return []
        return [p.name for p in d.iterdir() if not p.name.startswith(".")]
