"""A real PostgreSQL 15 (Debian's package) for tests: a private cluster (initdb in its own
folder, a free loopback port, its Unix socket in that folder), started and stopped with pg_ctl,
never the system service. PostgreSQL refuses to run as root: as root the cluster belongs to the
system user ``postgres`` (the package makes it) and its folder is made outside pytest's private
temp folders so that user can reach it. ``postgres_or_skip`` skips with the reason when the
server binaries or psycopg are missing. ``netns``: the server runs inside that network namespace
(its commands under ``ip netns exec``, as root): its loopback port is then reachable only from
inside it, so ``connect``/``execute`` of this process cannot reach it (a client there runs under
``ip netns exec`` too)."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.server_faults import ServerFaults, stop_process

BIN = Path("/usr/lib/postgresql/15/bin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PostgresServer(ServerFaults):
    """One cluster; ``stop``/``start`` restart it on the same port and data."""

    def __init__(self, user: str = "heron", password: str = "heron-secret", netns: str | None = None) -> None:
        if not (BIN / "initdb").exists():
            raise RuntimeError("postgresql 15 is not installed: apt-get install -y postgresql")
        self.folder = Path(tempfile.mkdtemp(prefix="heron-pg-"))
        self.as_root = os.geteuid() == 0
        self.netns = netns
        self.data = self.folder / "data"
        self.port = free_port()
        self.user, self.password = user, password
        self.url = f"postgresql://{user}:{password}@127.0.0.1:{self.port}/postgres"
        pwfile = self.folder / "pw"
        pwfile.write_text(password + "\n")
        if self.as_root:
            shutil.chown(self.folder, "postgres", "postgres")
            shutil.chown(pwfile, "postgres", "postgres")
        self._run([str(BIN / "initdb"), "-D", str(self.data), "-U", user, f"--pwfile={pwfile}",
                   "--auth-host=scram-sha-256", "--auth-local=scram-sha-256", "-E", "UTF8", "--no-sync"])
        with (self.data / "postgresql.conf").open("a") as f:
            # fsync off: a test cluster on a shared disk (a clean stop still writes everything)
            f.write(f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{self.folder}'\nfsync = off\nlog_min_messages = warning\n")
        self.running = False
        self._frozen: list[int] = []  # the pids stopped by freeze
        self.start()

    def _run(self, cmd: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        if self.as_root:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        if self.netns is not None:
            # outermost: entering a namespace needs root, which runuser then drops
            cmd = ["ip", "netns", "exec", self.netns, *cmd]
        r = subprocess.run(cmd, text=True, capture_output=True, timeout=timeout, cwd=self.folder)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}): {r.stdout[-1500:]} {r.stderr[-1500:]}")
        return r

    def start(self) -> None:
        self._run([str(BIN / "pg_ctl"), "-D", str(self.data), "-l", str(self.folder / "postgres.log"), "-w",
                   "-t", "60", "start"], timeout=90)
        self.running = True

    def stop(self) -> None:
        if self.running:
            self._run([str(BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"], timeout=90)
            self.running = False

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def pid(self) -> int:
        """The postmaster's pid (the first line of postmaster.pid)."""
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def processes(self) -> list[int]:
        """The postmaster and its children: every backend serves one connection in a process of
        its own, so a frozen server means all of them stopped, not only the postmaster."""
        import psutil

        master = psutil.Process(self.pid)
        return [master.pid, *(c.pid for c in master.children(recursive=True))]

    def freeze(self) -> None:
        """SIGSTOP of the postmaster and its backends (the postmaster first: no new backend is
        forked meanwhile): connections hang with their sockets open (no FIN, no RST; the kernel
        still accepts connections and data), as a hung or partitioned server's do."""
        self._frozen = []
        for pid in self.processes():
            with contextlib.suppress(ProcessLookupError, FileNotFoundError):  # a backend that just exited
                stop_process(pid)
                self._frozen.append(pid)

    def thaw(self) -> None:
        for pid in self._frozen:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self._frozen = []



    def destroy(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def connect(self, **kw: Any) -> Any:
        import psycopg

        return psycopg.connect(self.url, autocommit=True, **kw)

    def execute(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        with self.connect() as c:
            cur = c.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []


def postgres_or_skip(netns: str | None = None) -> PostgresServer:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is missing: pip install 'heron-py[postgres]'")
    if not (BIN / "initdb").exists():
        pytest.skip("postgresql 15 is missing: apt-get install -y postgresql")
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        pytest.skip("running as root without runuser: PostgreSQL cannot run as root")
    return PostgresServer(netns=netns)
