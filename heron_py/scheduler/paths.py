"""Where a topology's files live on a host running its containers."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from heron_py.common.host import heron_home

TOPOLOGY_ID_ENV = "HERON_PY_TOPOLOGY_ID"
# set in the environment of a container's executor and of every process it starts: with the
# topology id (TOPOLOGY_ID_ENV) it names the container a process belongs to. Here, with the
# container's folders, not in the scheduler interface: the daemons read it too
CONTAINER_ENV = "HERON_PY_CONTAINER"
PRIVATE_DIR_MODE = 0o700


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

    def private(self, path: Path) -> Path:
        """Makes ``path`` (a folder under the heron home) and every folder between the home and
        it the user's alone (0700): they hold logs with tuple data, the secret and the TLS key.
        One made by an older heron-py with looser modes is narrowed; one of another owner is
        left as it is (the home's owner check at start refuses such a home). Returns ``path``."""
        current = self.home
        for part in path.relative_to(self.home).parts:
            current = current / part
            try:
                os.mkdir(current, PRIVATE_DIR_MODE)
            except FileExistsError:
                st = os.stat(current)
                if st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) != PRIVATE_DIR_MODE:
                    os.chmod(current, PRIVATE_DIR_MODE)
        return path


# a Unix socket's path has at most 107 bytes (sun_path less its terminating NUL)
MAX_SOCKET_PATH = 107
SOCKET_NAME = "stmgr.sock"
# beside the port file when the socket is not in the container's own run/ folder
SOCKET_PATH_FILE = "stmgr.sock.path"


def _private_dir(path: Path) -> bool:
    """Whether ``path`` is a folder only we can enter: ours, mode 0700, not a symlink. A folder
    that exists with another owner (someone created it first) is never used."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        try:
            os.mkdir(path, 0o700)
        except OSError:
            return False
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
        return False
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(path, 0o700)
    return True


def bind_stmgr_socket(port_file: Path) -> str:
    """The stream manager's side: where to bind its Unix socket for the container's instances.

    In the container's own ``run/`` folder (mode 0700, ours) when the path is short enough;
    otherwise (a deep heron home, or a ``run`` someone else created) in a fresh private folder
    that ``mkdtemp`` makes (0700, a random name made with O_EXCL), whose path goes into
    ``stmgr.sock.path`` beside the port file. Never a fixed path in a shared folder, so no other
    user can take the name first or squat it between unlink and bind."""
    folder = port_file.parent / "run"
    path_file = port_file.parent / SOCKET_PATH_FILE
    direct = str(folder / SOCKET_NAME)
    if len(direct.encode()) <= MAX_SOCKET_PATH and _private_dir(folder):
        path_file.unlink(missing_ok=True)
        return direct
    import tempfile

    from heron_py.common.atomic import atomic_write_text

    sock = os.path.join(tempfile.mkdtemp(prefix="heron-py-"), SOCKET_NAME)
    if len(sock.encode()) > MAX_SOCKET_PATH:
        sock = os.path.join(tempfile.mkdtemp(prefix="heron-py-", dir="/tmp"), SOCKET_NAME)
    atomic_write_text(path_file, sock)
    return sock


def release_stmgr_socket(port_file: Path, sock: str) -> None:
    """Removes the socket and, when it had one, its private folder and the path file."""
    Path(sock).unlink(missing_ok=True)
    if Path(sock).parent != port_file.parent / "run":
        try:
            os.rmdir(Path(sock).parent)
        except OSError:
            pass
        (port_file.parent / SOCKET_PATH_FILE).unlink(missing_ok=True)


def stmgr_socket(port_file: Path) -> str:
    """An instance's side: the Unix socket where its container's stream manager serves it
    (``bind_stmgr_socket`` says where); read before each connect, since a restarted stream
    manager may have moved it."""
    try:
        return (port_file.parent / SOCKET_PATH_FILE).read_text().strip()
    except FileNotFoundError:
        return str(port_file.parent / "run" / SOCKET_NAME)
