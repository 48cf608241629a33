"""Gauges of the current process, reported by every daemon and instance to its metrics manager."""

from __future__ import annotations

import psutil


def process_gauges() -> dict[str, float]:
    """psutil gauges of this process: CPU seconds, RSS, threads, open file descriptors."""
    p = psutil.Process()
    with p.oneshot():
        t = p.cpu_times()
        return {"cpu_seconds": t.user + t.system, "rss_bytes": p.memory_info().rss,
                "threads": p.num_threads(), "open_fds": p.num_fds()}
