"""Where a topology's files live on a host running its containers: its folders under the heron
home (``TopologyPaths``) and, in one place, the files of one container's folder
(``ContainerLayout``: the secret, the stream manager's port file and Unix socket, the metrics
manager's ``metricsmgr.json``, the executor's ``restarts.json``...), which the executor writes,
the daemons and the CLI read and the Kubernetes pod's script prepares. No other module spells
their names (tests/unit/project/test_structure.py). Here, in the foundation, so a daemon reaches
them without importing a scheduler or a state backend."""

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

    def container(self, k: int | str) -> Path:
        """Container ``k``'s folder (a ``str``: the shell variable holding it in a pod's script)."""
        return self.root / f"container-{k}"

    def layout(self, k: int | str) -> ContainerLayout:
        """Container ``k``'s files."""
        return ContainerLayout(self.container(k))

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
# in the container's folder when the socket is not in its own run/ folder
SOCKET_PATH_FILE = "stmgr.sock.path"


@dataclass(frozen=True)
class ContainerLayout:
    """One container's folder (``topologies/NAME/container-K`` under the heron home) and the
    files in it that more than one process names. A daemon is handed one of them by its
    executor (``--port-file``, ``--secret-file``) and finds the others beside it (``beside``)."""

    folder: Path

    @classmethod
    def beside(cls, file: Path) -> ContainerLayout:
        """The layout of the container folder holding ``file``."""
        return cls(file.parent)

    @property
    def secret(self) -> Path:
        """The topology secret (0600), which the daemons authenticate their frames with."""
        return self.folder / "secret"

    @property
    def checkpoint_key(self) -> Path:
        """The key that signs checkpoint files (the state store's ``checkpointkeys/NAME``, kept
        across kills, unlike the secret, so that a topology submitted again can load them): the
        master and the instances read it (``heron_py.checkpoint.storage.checkpoint_key_beside``)."""
        return self.folder / "checkpoint.key"

    @property
    def tls(self) -> Path:
        """The topology's TLS material, when it has one (``--tls-file``)."""
        return self.folder / "tls.json"

    @property
    def package(self) -> Path:
        """The topology package, unpacked."""
        return self.folder / "package"

    @property
    def stmgr_port(self) -> Path:
        """The stream manager's TCP port, written once it listens (its instances read it)."""
        return self.folder / "stmgr.port"

    @property
    def metricsmgr(self) -> Path:
        """The metrics manager's ports and pid (``{"port", "http_port", "pid"}``), written once
        it listens; the container's processes find it there (``heron_py.common.metrics_link``)."""
        return self.folder / "metricsmgr.json"

    @property
    def restarts(self) -> Path:
        """The executor's restart count of each child, since the container's start."""
        return self.folder / "restarts.json"

    @property
    def alive(self) -> Path:
        """The folder of the children's liveness files (``heron_py.common.alive``)."""
        return self.folder / "alive"

    @property
    def run(self) -> Path:
        """The private folder (0700) of the stream manager's Unix socket, when its path is short
        enough (``bind_stmgr_socket``)."""
        return self.folder / "run"

    @property
    def socket_path_file(self) -> Path:
        """Where the stream manager's Unix socket is, when it is not in ``run``."""
        return self.folder / SOCKET_PATH_FILE

    def bind_stmgr_socket(self) -> str:
        """The stream manager's side: where to bind its Unix socket for the container's instances.

        In the container's own ``run/`` folder (mode 0700, ours) when the path is short enough;
        otherwise (a deep heron home, or a ``run`` someone else created) in a fresh private folder
        that ``mkdtemp`` makes (0700, a random name made with O_EXCL), whose path goes into
        ``socket_path_file``. Never a fixed path in a shared folder, so no other user can take the
        name first or squat it between unlink and bind."""
        direct = str(self.run / SOCKET_NAME)
        if len(direct.encode()) <= MAX_SOCKET_PATH and _private_dir(self.run):
            self.socket_path_file.unlink(missing_ok=True)
            return direct
        import tempfile

        from heron_py.common.atomic import atomic_write_text

        sock = os.path.join(tempfile.mkdtemp(prefix="heron-py-"), SOCKET_NAME)
        if len(sock.encode()) > MAX_SOCKET_PATH:
            sock = os.path.join(tempfile.mkdtemp(prefix="heron-py-", dir="/tmp"), SOCKET_NAME)
        atomic_write_text(self.socket_path_file, sock)
        return sock

    def release_stmgr_socket(self, sock: str) -> None:
        """Removes the socket and, when it had one, its private folder and the path file."""
        Path(sock).unlink(missing_ok=True)
        if Path(sock).parent != self.run:
            try:
                os.rmdir(Path(sock).parent)
            except OSError:
                pass
            self.socket_path_file.unlink(missing_ok=True)

    def stmgr_socket(self) -> str:
        """An instance's side: the Unix socket where its container's stream manager serves it
        (``bind_stmgr_socket`` says where); read before each connect, since a restarted stream
        manager may have moved it."""
        try:
            return self.socket_path_file.read_text().strip()
        except FileNotFoundError:
            return str(self.run / SOCKET_NAME)


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
