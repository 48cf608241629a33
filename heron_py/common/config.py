"""Engine configuration: frozen dataclasses built once from defaults and topology config.

Keys follow Heron's names where Heron has one. Values in a topology's config are strings
(heronpy's sanitized form), so each reader parses and checks its own keys here and fails
with one clear message naming the key, the expected type and the value found.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

TICK_FREQ = "topology.tick.tuple.freq.secs"
BATCH_SIZE = "heron_py.instance.batch.size"
METRICS_INTERVAL = "topology.metrics.export.interval.secs"
FLUSH_IDLE = "heron_py.instance.flush.when.idle"
# on by default; off only to measure what the specialised emit saves (bench/)
SPECIALIZED_EMIT = "heron_py.instance.specialized.emit"  # tuples per destination before a flush
BATCH_FLUSH_MS = "heron_py.instance.batch.flush.ms"
IN_QUEUE = "heron_py.instance.inbound.queue.batches"
IN_QUEUE_BYTES = "heron_py.instance.inbound.queue.bytes"
OUT_QUEUE = "heron_py.instance.outbound.queue.batches"
OUT_QUEUE_BYTES = "heron_py.instance.outbound.queue.bytes"
MAX_FRAME = "heron_py.network.max.frame.bytes"
CAPTURE_DIR = "heron_py.testing.capture.dir"
CAPTURE_COMPONENTS = "heron_py.testing.capture.components"


class ConfigError(ValueError):
    pass


def _num(cfg: Mapping[str, Any], key: str, default: float, kind: type, minimum: float) -> Any:
    raw = cfg.get(key)
    if raw is None or raw == "":
        return kind(default)
    try:
        value = kind(raw) if not isinstance(raw, bool) else None
    except (TypeError, ValueError):
        value = None
    if value is None or value < minimum:
        raise ConfigError(
            f"config {key}: expected {'an integer' if kind is int else 'a number'} >= {minimum}, "
            f"found {raw!r}"
        )
    return value


@dataclass(frozen=True)
class InstanceConfig:
    batch_size: int = 1024
    flush_interval_s: float = 0.001
    in_queue_batches: int = 64
    in_queue_bytes: int = 32 * 1024 * 1024
    out_queue_batches: int = 64
    out_queue_bytes: int = 32 * 1024 * 1024
    tick_freq_s: float | None = None
    max_frame: int = 16 * 1024 * 1024
    flush_when_idle: bool = True  # a bolt flushes as soon as its input queue is empty
    metrics_interval_s: float = 10.0  # topology.metrics.export.interval.secs; 0: no metrics reports

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> InstanceConfig:
        tick = cfg.get(TICK_FREQ)
        return cls(
            batch_size=_num(cfg, BATCH_SIZE, 1024, int, 1),
            flush_interval_s=_num(cfg, BATCH_FLUSH_MS, 1.0, float, 0.0) / 1000.0,
            in_queue_batches=_num(cfg, IN_QUEUE, 64, int, 1),
            in_queue_bytes=_num(cfg, IN_QUEUE_BYTES, 32 * 1024 * 1024, int, 1),
            out_queue_batches=_num(cfg, OUT_QUEUE, 64, int, 1),
            out_queue_bytes=_num(cfg, OUT_QUEUE_BYTES, 32 * 1024 * 1024, int, 1),
            tick_freq_s=None if tick in (None, "") else _num(cfg, TICK_FREQ, 0, float, 0.001),
            max_frame=_num(cfg, MAX_FRAME, 16 * 1024 * 1024, int, 1024),
            metrics_interval_s=_num(cfg, METRICS_INTERVAL, 10.0, float, 0.0),
            flush_when_idle=str(cfg.get(FLUSH_IDLE, "true")).lower() != "false",
        )
