"""heronpy's process-wide counter (Heron's GlobalMetrics): ``safe_incr("name")`` from any
component code; the runtime registers it as the user metric ``__auto__`` of the task."""

from __future__ import annotations

import threading
from typing import Any

from heron_py.api.metrics import MultiCountMetric

metricsContainer = MultiCountMetric()  # heronpy's name
registered = False
root_name = "__auto__"

lock = threading.Lock()


def incr(key: str, to_add: int = 1) -> None:
    metricsContainer.incr(key, to_add)


def safe_incr(key: str, to_add: int = 1) -> None:
    with lock:
        metricsContainer.incr(key, to_add)


def init(metrics_collector: Any, metrics_bucket: int) -> None:
    """Registers the counter once per process (one task per process: once per task)."""
    global registered
    with lock:
        if not registered:
            metrics_collector.register_metric(root_name, metricsContainer, metrics_bucket)
            registered = True
