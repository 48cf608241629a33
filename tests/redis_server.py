"""A real redis-server (Debian's package) for tests: on a free loopback port, with its own
config file and data folder (AOF on, so a restart keeps the data), never the system service.
``redis_or_skip`` skips with the reason when the binary or redis-py is missing."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.server_faults import ServerFaults, stop_process


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer(ServerFaults):
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
        stop_process(self.pid)

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)




def redis_or_skip(folder: Path, **kw: Any) -> RedisServer:
    try:
        import redis  # noqa: F401
    except ImportError:
        pytest.skip("redis-py is missing: pip install 'heron-py[redis]'")
    if shutil.which("redis-server") is None and not Path("/usr/bin/redis-server").exists():
        pytest.skip("redis-server is missing: apt-get install -y redis-server")
    return RedisServer(folder, **kw)
