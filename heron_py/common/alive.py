"""Liveness of a container's processes, as their executor sees it.

Each daemon and instance touches a file of its own (``HERON_PY_ALIVE_FILE``, set by its
executor) every ``BEAT_S`` from its event loop. A process frozen by SIGSTOP, or one whose event
loop is stuck, stops touching it; its executor then kills it with SIGKILL (which ends a stopped
process too) and restarts it (``heron_py/scheduler/executor.py``). A file, not a socket: the
probe costs one ``utime`` a second and cannot itself hang the executor's loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Callable

ALIVE_ENV = "HERON_PY_ALIVE_FILE"
# the executor's pid, for children that end with it: a container whose executor is gone is
# unsupervised (a task that dies is never restarted), so its processes stop, the container goes
# silent, and the master relaunches it whole (the topology master itself is not given it: it
# must not go down with its container's executor)
EXECUTOR_ENV = "HERON_PY_EXECUTOR_PID"
BEAT_S = 1.0


def touch(path: str) -> None:
    try:
        os.utime(path)
    except FileNotFoundError:
        with open(path, "ab"):
            pass


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, another user's (a reused pid): not ours to judge
    return True


async def beat(path: str | None = None, every_s: float = BEAT_S,
               on_orphaned: Callable[[], None] | None = None) -> None:
    """Touches ``path`` (default: the file the executor named) every ``every_s`` until cancelled;
    without a file to touch (a process not started by an executor) it returns at once. When the
    executor named by ``HERON_PY_EXECUTOR_PID`` is gone, calls ``on_orphaned`` (default: SIGTERM
    to this process, so it stops as it would at ``kill``) once."""
    path = path or os.environ.get(ALIVE_ENV)
    if not path:
        return
    executor = int(os.environ.get(EXECUTOR_ENV) or 0)
    while True:
        try:
            touch(path)
        except OSError:
            pass  # a full disk or a removed folder: the executor's probe then says so
        if executor and not pid_alive(executor):
            logging.getLogger("heron_py.alive").warning(
                "the executor (pid %d) is gone: stopping, so that the container is relaunched whole", executor)
            (on_orphaned or (lambda: os.kill(os.getpid(), signal.SIGTERM)))()
            return
        await asyncio.sleep(every_s)


def silent_for(mtime: float | None, started_at: float, now: float) -> float:
    """Seconds since a process last proved it was alive: its file's last touch, or its start
    when it has not touched it yet (a process starting up gets the same allowance)."""
    last = started_at if mtime is None else max(mtime, started_at)
    return max(0.0, now - last)
