"""What every daemon process shares: logging set-up, the event loop, signals, exit codes.

A daemon is an object with ``async start()``, ``async wait()`` (returns when it should
exit) and ``stop()`` (idempotent). ``run_daemon`` installs SIGTERM/SIGINT handlers once,
so a second signal during shutdown does not start a second shutdown.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, Protocol

from heron_py.common.alive import beat
from heron_py.common.atomic import atomic_write_text


class Daemon(Protocol):
    async def start(self) -> None: ...
    async def wait(self) -> int: ...
    def stop(self) -> None: ...


class DaemonBase:
    """What daemons share: the stop event, their background tasks, an idempotent stop."""

    _stopped: asyncio.Event | None = None
    _tasks: list[asyncio.Task[None]]
    exit_code: int = 0

    def _begin(self) -> None:
        self._stopped = asyncio.Event()
        self._tasks = []

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.append(asyncio.ensure_future(coro))

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """A short task of a collaborator (one answer to send): cancelled at stop like the
        daemon's own, and forgotten once it is done."""
        task = asyncio.ensure_future(coro)
        self._tasks.append(task)
        task.add_done_callback(self._tasks.remove)

    async def wait(self) -> int:
        assert self._stopped is not None
        await self._stopped.wait()
        return self.exit_code

    def _begin_stop(self) -> bool:
        """True the first time (the caller then releases its resources), False after."""
        if self._stopped is None or self._stopped.is_set():
            return False
        self._stopped.set()
        for t in self._tasks:
            t.cancel()
        return True


def write_atomically(path: Path, text: str) -> None:
    """Readers of ``path`` (port files) never see half a write."""
    atomic_write_text(path, text)


class FatalError(Exception):
    """A condition a daemon cannot go on from; its message is the whole story."""


def setup_logging(name: str, level: int = logging.INFO) -> logging.Logger:
    logging.basicConfig(
        level=level,
        stream=sys.stdout,
        format=f"%(asctime)s %(levelname)s {name} %(name)s: %(message)s",
    )
    return logging.getLogger(name)


def new_event_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
    except ImportError:  # pragma: no cover - uvloop is a dependency; keep working without it
        loop = asyncio.new_event_loop()
    return loop


def run_until_complete(coro: Coroutine[Any, Any, Any]) -> Any:
    loop = new_event_loop()
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def run_daemon(daemon: Daemon, log: logging.Logger) -> int:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, daemon.stop)
        alive = asyncio.ensure_future(beat())  # the executor's liveness probe (heron_py/common/alive.py)
        try:
            await daemon.start()
            return await daemon.wait()
        except FatalError as e:
            log.error("%s", e)
            return 2
        finally:
            alive.cancel()
            daemon.stop()

    code: int = run_until_complete(main())
    logging.shutdown()
    return code
