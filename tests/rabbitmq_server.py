"""A real RabbitMQ (Debian's rabbitmq-server) for tests: a private node (its own name, free AMQP
and distribution ports, data, logs, config and Erlang cookie under one folder), never the system
service. ``rabbitmq_or_skip`` skips with the reason when the server or pika is missing.

The node is started detached and waited for with ``rabbitmqctl await_startup``; ``stop`` is
``rabbitmqctl stop`` (the queues and persistent messages stay on disk, so ``start`` brings them
back: a restart mid-run)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.server_faults import ServerFaults, stop_process

SBIN = Path("/usr/lib/rabbitmq/bin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _binary(name: str) -> str | None:
    if (SBIN / name).exists():
        return str(SBIN / name)
    return shutil.which(name)


class RabbitMQServer(ServerFaults):
    """One RabbitMQ node; ``stop``/``start`` restart it with the same name, port and data."""

    def __init__(self, folder: Path, user: str = "heron", password: str = "heron-secret") -> None:
        server, ctl = _binary("rabbitmq-server"), _binary("rabbitmqctl")
        if server is None or ctl is None:
            raise RuntimeError("rabbitmq-server is not installed: apt-get install -y rabbitmq-server")
        self.server_bin, self.ctl_bin = server, ctl
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.dist_port = free_port()
        self.node = f"heron-{uuid.uuid4().hex[:10]}@localhost"
        self.user, self.password = user, password
        self.url = f"amqp://{user}:{password}@127.0.0.1:{self.port}/%2F"
        (folder / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\nloopback_users = none\n"
            f"default_user = {user}\ndefault_pass = {password}\n"
            "log.console = false\nlog.file.level = info\n"
            # a disk alarm would block publishers on a busy shared machine
            "disk_free_limit.absolute = 1MB\nvm_memory_high_watermark.relative = 0.9\n")
        (folder / "home").mkdir(exist_ok=True)
        cookie = folder / "home" / ".erlang.cookie"
        cookie.write_text(uuid.uuid4().hex)
        cookie.chmod(0o400)
        self.env = {**os.environ, "HOME": str(folder / "home"), "RABBITMQ_NODENAME": self.node,
                    "RABBITMQ_NODE_PORT": str(self.port), "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
                    "RABBITMQ_DIST_PORT": str(self.dist_port),
                    "RABBITMQ_MNESIA_BASE": str(folder / "mnesia"), "RABBITMQ_LOG_BASE": str(folder / "log"),
                    "RABBITMQ_CONFIG_FILE": str(folder / "rabbitmq"),  # + ".conf"
                    "RABBITMQ_ENABLED_PLUGINS_FILE": str(folder / "enabled_plugins"),
                    "RABBITMQ_PID_FILE": str(folder / "rabbitmq.pid")}
        (folder / "enabled_plugins").write_text("[].\n")
        self.running = False
        self._frozen: int | None = None  # the pid stopped by freeze
        self.start()

    def ctl(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.ctl_bin, "-n", self.node, *args], env=self.env, text=True,
                              capture_output=True, timeout=timeout)

    def start(self) -> None:
        subprocess.run([self.server_bin, "-detached"], env=self.env, check=True, timeout=60,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # await_startup answers "not running" until the detached node registered with epmd
        deadline = time.monotonic() + 90
        while True:
            r = self.ctl("await_startup", "--timeout", "60", timeout=90)
            if r.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if r.returncode != 0:
            logs = "".join(p.read_text()[-2000:] for p in (self.folder / "log").glob("*.log")) \
                if (self.folder / "log").exists() else ""
            raise RuntimeError(f"rabbitmq node {self.node} did not start: {r.stderr.strip()} {logs}")
        self.running = True
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # the listener opens a moment after the boot steps
            try:
                socket.create_connection(("127.0.0.1", self.port), 1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"rabbitmq node {self.node} is not listening on {self.port}")

    def stop(self) -> None:
        if self.running:
            self.ctl("stop", timeout=60)
            self.running = False

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def pid(self) -> int:
        """The node's Erlang VM (beam.smp), the process that holds the AMQP sockets: the node
        writes its pid to RABBITMQ_PID_FILE once it booted."""
        pid_file = self.folder / "rabbitmq.pid"
        if not self.running or not pid_file.exists():
            raise RuntimeError(f"rabbitmq node {self.node} is not running (no {pid_file})")
        return int(pid_file.read_text().split()[0])

    def freeze(self) -> None:
        """SIGSTOP of the Erlang VM: the broker hangs with its sockets open (no FIN, no RST; the
        kernel still accepts connections and data), as a hung or partitioned broker does."""
        self._frozen = self.pid
        stop_process(self._frozen)

    def thaw(self) -> None:
        pid = self._frozen
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
            self._frozen = None



    def connection(self) -> Any:
        import pika

        return pika.BlockingConnection(pika.URLParameters(self.url))

    def declare(self, *queues: str) -> None:
        c = self.connection()
        ch = c.channel()
        for q in queues:
            ch.queue_declare(q, durable=True)
        c.close()

    def depth(self, queue: str) -> tuple[int, int]:
        """(ready, unacknowledged) messages of ``queue``, from rabbitmqctl."""
        r = self.ctl("list_queues", "name", "messages_ready", "messages_unacknowledged", "--no-table-headers",
                     "--quiet", timeout=30)
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == queue:
                return int(parts[1]), int(parts[2])
        return -1, -1


def rabbitmq_or_skip(folder: Path, **kw: Any) -> RabbitMQServer:
    try:
        import pika  # noqa: F401
    except ImportError:
        pytest.skip("pika is missing: pip install 'heron-py[rabbitmq]'")
    if _binary("rabbitmq-server") is None:
        pytest.skip("rabbitmq-server is missing: apt-get install -y rabbitmq-server")
    return RabbitMQServer(folder, **kw)
