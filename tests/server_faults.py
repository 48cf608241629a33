"""Fault injection shared by the test servers (Redis, RabbitMQ, PostgreSQL): a server frozen
(SIGSTOP: it hangs with its sockets open, no FIN, no RST; the kernel still accepts connections
and data, as a hung server does) and always resumed, and its TCP connections reset (``ss -K``).
A server class mixes in ``ServerFaults`` and defines ``port``, ``freeze()`` and ``thaw()``."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from typing import Any


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


def stop_process(pid: int, timeout_s: float = 10.0) -> None:
    """SIGSTOP ``pid`` and wait until every thread of it is stopped ('T' in /proc/PID/task/*/stat).
    kill() returns once the signal is queued; a thread running on another core stops only when
    it next enters the kernel, and on a loaded machine a broker's scheduler thread answered
    publishes that came right after kill() (CI saw 5 confirms of a "frozen" RabbitMQ)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        states = []
        for task in os.listdir(f"/proc/{pid}/task"):
            # a thread that just exited has no stat file
            with contextlib.suppress(FileNotFoundError), open(f"/proc/{pid}/task/{task}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        if states and all(s in ("T", "t") for s in states):
            return
        time.sleep(0.001)
    raise RuntimeError(f"process {pid} did not stop within {timeout_s:g} s of SIGSTOP")


def can_reset_connections() -> str | None:
    """None when ``ss -K`` can kill sockets here, else why not (a skip reason)."""
    if shutil.which("ss") is None:
        return "ss (iproute2) is missing: apt-get install -y iproute2"
    if os.geteuid() != 0:
        return "ss -K needs root (CAP_NET_ADMIN)"
    return None


class ServerFaults:
    """Mixed into a server class that has ``port``, ``freeze()`` and ``thaw()``."""

    port: int
    freeze: Any
    thaw: Any

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """Frozen inside the block, and always resumed after it (a stopped server would hang the
        fixture's stop)."""
        self.freeze()
        try:
            yield
        finally:
            self.thaw()

    def reset_connections(self) -> int:
        """Kills every TCP connection to the server with ``ss -K`` (root: a RST to both ends);
        the number of sockets ``ss`` killed (each connection is listed from the client's side)."""
        return reset_connections(self.port)
