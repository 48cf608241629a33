"""The current process: the gauges every daemon and instance reports to its metrics manager, and
the stop flag of the processes that loop until SIGTERM (StopSignals)."""

from __future__ import annotations

import signal
from types import FrameType

import psutil


def process_gauges() -> dict[str, float]:
    """psutil gauges of this process: CPU seconds, RSS, threads, open file descriptors."""
    p = psutil.Process()
    with p.oneshot():
        t = p.cpu_times()
        return {"cpu_seconds": t.user + t.system, "rss_bytes": p.memory_info().rss,
                "threads": p.num_threads(), "open_fds": p.num_fds()}


class StopSignals:
    """A flag SIGTERM and SIGINT set, for a process whose main loop polls it between passes
    (the executor, the supervisor): the handler only records the request, so a signal never
    lands in the middle of a pass."""

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.requested = True
