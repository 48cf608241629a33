"""A real redis-server (Debian's package) for tests: on a free loopback port, with its own
config file and data folder (AOF on, so a restart keeps the data), never the system service.
``redis_or_skip`` skips with the reason when the binary or redis-py is missing."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process; ``stop``/``start`` restart it on the same port and folder."""

    def __init__(self, folder: Path, password: str | None = None, appendonly: bool = True) -> None:
        binary = shutil.which("redis-server") or ("/usr/bin/redis-server" if Path("/usr/bin/redis-server").exists()
                                                  else None)
        if binary is None:
            raise RuntimeError("redis-server is not installed: apt-get install -y redis-server")
        self.binary = binary
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.password = password
        self.url = f"redis://127.0.0.1:{self.port}/0" if password is None else \
            f"redis://:{password}@127.0.0.1:{self.port}/0"
        lines = [f"port {self.port}", "bind 127.0.0.1", "protected-mode yes", f"dir {folder}",
                 "daemonize no", "save ''", f"appendonly {'yes' if appendonly else 'no'}",
                 "appendfsync everysec", f"logfile {folder / 'redis.log'}", "databases 4"]
        if password is not None:
            lines.append(f"requirepass {password}")
        self.conf = folder / "redis.conf"
        self.conf.write_text("\n".join(lines) + "\n")
        self._proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self._proc = subprocess.Popen([self.binary, str(self.conf)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self._proc.returncode}: "
                                   f"{(self.folder / 'redis.log').read_text()[-2000:]}")
            try:
                c = self.client()
                c.ping()
                c.close()
                return
            except Exception as e:  # loading the AOF, or not listening yet
                if "WRONGPASS" in str(e) or "NOAUTH" in str(e):
                    return
                time.sleep(0.05)
        raise RuntimeError(f"redis-server on port {self.port} did not answer within 20 s")

    def client(self, **kw: Any) -> Any:
        import redis

        return redis.Redis.from_url(self.url, **kw)

    def stop(self, kill: bool = False) -> None:
        if self._proc is None:
            return
        if kill:
            self._proc.kill()
        else:
            self._proc.terminate()  # SIGTERM: redis flushes the AOF and exits
        self._proc.wait(timeout=30)
        self._proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError(f"redis-server on port {self.port} is not running")
        return self._proc.pid

    def freeze(self) -> None:
        """SIGSTOP: the server hangs with its sockets open (no FIN, no RST; the kernel still
        accepts connections and data), as a hung or partitioned server does."""
        os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Frozen inside the block, and always resumed after it (a stopped server would hang the
        fixture's teardown)."""
        self.freeze()
        try:
            yield
        finally:
            self.thaw()

    def reset_connections(self) -> int:
        """Kills every TCP connection to the server with ``ss -K`` (root: a RST to both ends);
        the number of sockets ``ss`` killed (each connection is listed from the client's side)."""
        return reset_connections(self.port)


def reset_connections(port: int) -> int:
    """``ss -K`` of the loopback TCP connections to ``port``; the number of client sockets killed.
    Needs root (CAP_NET_ADMIN) and a kernel with CONFIG_INET_DIAG_DESTROY."""
    r = subprocess.run(["ss", "-K", "-t", "-n", "dst", "127.0.0.1", "dport", "=", f":{port}"], text=True,
                       capture_output=True, timeout=10)
    if r.returncode != 0:
        raise RuntimeError(f"ss -K failed ({r.returncode}): {r.stderr.strip()}")
    # the lines after the header: State Recv-Q Send-Q Local:Port Peer:Port
    return sum(1 for line in r.stdout.splitlines()[1:]
               if len(line.split()) >= 5 and line.split()[4].endswith(f":{port}"))


def can_reset_connections() -> str | None:
    """None when ``ss -K`` can kill sockets here, else why not (a skip reason)."""
    if shutil.which("ss") is None:
        return "ss (iproute2) is missing: apt-get install -y iproute2"
    if os.geteuid() != 0:
        return "ss -K needs root (CAP_NET_ADMIN)"
    return None


def redis_or_skip(folder: Path, **kw: Any) -> RedisServer:
    try:
        import redis  # noqa: F401
    except ImportError:
        pytest.skip("redis-py is missing: pip install 'heron-py[redis]'")
    if shutil.which("redis-server") is None and not Path("/usr/bin/redis-server").exists():
        pytest.skip("redis-server is missing: apt-get install -y redis-server")
    return RedisServer(folder, **kw)
