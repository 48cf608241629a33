"""A real ZooKeeper server (Debian's zookeeper package) on a free port, for tests.

Started with zkServer.sh and a private zoo.cfg, as an operator would without systemd; tests
can stop and start it again mid-run (same dataDir, so sessions and nodes survive as they do
on a real restart).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

ZK_SERVER = Path("/usr/share/zookeeper/bin/zkServer.sh")
# a short tick lets sessions be as short as 1 s (ZooKeeper allows 2 to 20 ticks)
TICK_MS = 500


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ZkServer:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.port = free_port()
        self.data = base / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.cfg = base / "zoo.cfg"
        self.cfg.write_text(
            f"tickTime={TICK_MS}\ndataDir={self.data}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n4lw.commands.whitelist=ruok\nmaxClientCnxns=200\n")

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _run(self, action: str) -> None:
        env = dict(os.environ, ZOO_LOG_DIR=str(self.base), ZOOPIDFILE=str(self.base / "zk.pid"))
        subprocess.run([str(ZK_SERVER), action, str(self.cfg)], env=env, check=True, capture_output=True,
                       timeout=60)

    def ruok(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"ruok")
                return s.recv(8) == b"imok"
        except OSError:
            return False

    def start(self, timeout: float = 60.0) -> None:
        self._run("start")
        deadline = time.monotonic() + timeout
        while not self.ruok():
            if time.monotonic() > deadline:
                log = "\n".join(p.read_text(errors="replace")[-3000:] for p in self.base.glob("*.out"))
                raise RuntimeError(f"ZooKeeper did not answer ruok on {self.hosts} within {timeout:g} s:\n{log}")
            time.sleep(0.2)

    def stop(self) -> None:
        self._run("stop")
        deadline = time.monotonic() + 30
        while self.ruok() and time.monotonic() < deadline:
            time.sleep(0.1)


def raw_client(hosts: str):
    """A plain kazoo client with heron-py's credential (the file $HERON_PY_ZK_AUTH_FILE names,
    as the zk fixture sets it): heron-py's nodes admit nobody else."""
    from kazoo.client import KazooClient

    from heron_py.state.zookeeper import load_credential

    user, password = load_credential(Path(os.environ["HERON_PY_ZK_AUTH_FILE"]))
    return KazooClient(hosts=hosts, auth_data=[("digest", f"{user}:{password}")])
