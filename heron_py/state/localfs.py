"""State on the local file system, under ``$HERON_PY_HOME/state`` (default ~/.heron-py)."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from heron_py.common.atomic import SweepTarget, atomic_write_bytes, sweep_temp_files
from heron_py.common.host import heron_home
from heron_py.planner.logical import check_topology_name
from heron_py.state.base import LocationWatcher, StateManager, StateManagerError, TManagerLocation, local_owner

# how often a local watch looks at the file; a local store has no change notifications
WATCH_POLL_S = 0.2


HOME_MODE = 0o700


def private_home(home: Path | None = None) -> Path:
    """The heron home (``home`` or ``heron_home()``), checked at every process's start: it holds
    the state store (every topology's secret), the TLS keys and the logs, which carry tuple data,
    so it is its user's alone. Made 0700 when missing; one of ours with looser modes is narrowed
    to 0700; one another uid owns is refused (StateManagerError, one line): whoever owns it could
    read or change everything in it."""
    path = home or heron_home()
    try:
        path.mkdir(mode=HOME_MODE, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as e:
        raise StateManagerError(f"heron home {path}: cannot make it: {e.strerror or e}; expected a folder this user "
                                f"(uid {os.geteuid()}) may create (set HERON_PY_HOME to choose another)") from None
    if not stat.S_ISDIR(st.st_mode):
        raise StateManagerError(f"heron home {path}: expected a folder, found a file (set HERON_PY_HOME to choose "
                                f"another)")
    if st.st_uid != os.geteuid():
        raise StateManagerError(f"heron home {path}: owned by uid {st.st_uid}, expected uid {os.geteuid()} (this "
                                f"user): it holds topology secrets and logs, and its owner could read or change "
                                f"them; set HERON_PY_HOME to a folder of your own")
    if stat.S_IMODE(st.st_mode) != HOME_MODE:
        os.chmod(path, HOME_MODE)
    return path


log = logging.getLogger(__name__)


class LocalFsStateManager(StateManager):
    def __init__(self, root: Path | None = None, *, wall: Callable[[], float] = time.time) -> None:
        self.root = (root or heron_home()) / "state"
        # documents are state/KIND/NAME, written atomically: a crash mid-write leaves a temporary
        # file there that nothing else would remove. Every hidden file in a kind's folder but the
        # locks is one of ours (names may not start with a dot), so the old temp names go too.
        removed, errors = sweep_temp_files([SweepTarget(self.root, depth=2, legacy=True)], wall())
        for path in removed:
            log.info("state store: removed %s, a temporary file left by an interrupted write", path)
        for line in errors:
            log.warning("state store: %s", line)

    def _path(self, kind: str, name: str) -> Path:
        if kind not in self.KINDS:
            raise ValueError(f"unknown state kind {kind!r}; expected one of {self.KINDS}")
        # the name becomes a file name: check_topology_name refuses "..", "/" and hidden names
        # with the error the CLI prints, not a traceback
        check_topology_name(name)
        return self.root / kind / name

    def _put(self, kind: str, name: str, data: bytes, *, private: bool = False) -> None:
        path = self._path(kind, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        # a reader never sees half a document, and a crash leaves the old one or the new one
        atomic_write_bytes(path, data, mode=0o600 if private else None)

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

    def next_master_epoch(self, name: str) -> int:
        path = self._path("masterepochs", name)
        path.parent.mkdir(parents=True, exist_ok=True)
        # the lock makes read-increment-write atomic between masters on this host; the write is
        # atomic and fsynced, so a crash leaves the old number or the new one
        with open(path.parent / f".{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                current = int(path.read_text() or "0")
            except FileNotFoundError:
                current = 0
            atomic_write_bytes(path, str(current + 1).encode())
        return current + 1

    # --- the topology master's location: a file whose holder is a live local process ---
    def acquire_tmanager(self, name: str, loc: TManagerLocation) -> TManagerLocation | None:
        path = self._path("tmanagers", name)
        path.parent.mkdir(parents=True, exist_ok=True)
        # the lock makes check-then-write atomic between two masters on this host
        with open(path.parent / f".{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = self.get_tmanager_location(name)
            if current is not None and current.owner != loc.owner and _alive(current):
                return current
            self.set_tmanager_location(name, loc)
        return None

    def get_tmanager_location(self, name: str) -> TManagerLocation | None:
        # a dead holder's file (a master killed before it could remove it) is no location, as
        # the watch below counts it: its port is free for any local process to take
        loc = super().get_tmanager_location(name)
        return loc if loc is None or _alive(loc) else None

    def release_tmanager(self, name: str) -> None:
        current = self.get_tmanager_location(name)
        if current is not None and current.owner == local_owner():
            self._delete("tmanagers", name)

    def forget_tmanager(self, name: str, host: str, pid: int) -> bool:
        path = self._path("tmanagers", name)
        path.parent.mkdir(parents=True, exist_ok=True)
        # under acquire's lock: a master claiming the location now is never removed
        with open(path.parent / f".{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            current = super().get_tmanager_location(name)
            if current is None or current.host != host or current.pid != pid:
                return False
            self._delete("tmanagers", name)
        return True

    def watch_tmanager_location(self, name: str, callback: LocationWatcher) -> Callable[[], None]:
        stop = threading.Event()

        def poll() -> None:
            last: object = object()
            while not stop.is_set():
                cur = self.get_tmanager_location(name)
                if cur is not None and not _alive(cur):
                    cur = None  # a dead holder's file counts as no location, like an expired node
                if cur != last:
                    last = cur
                    callback(cur)
                stop.wait(WATCH_POLL_S)

        threading.Thread(target=poll, name=f"watch-tmanager-{name}", daemon=True).start()
        return stop.set


def _alive(loc: TManagerLocation) -> bool:
    host, _, pid = loc.owner.rpartition(":")
    if host and host != socket.gethostname():
        return True  # another host's process: we cannot tell, so trust the claim
    try:
        return psutil.Process(int(pid or loc.pid)).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, ValueError):
        return False
