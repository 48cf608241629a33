"""Pieces every connector after Kafka needs and ``base`` does not have yet: option readers that
fail with one line (what, where, expected, found), a throttle so a repeated error is logged once
per period, a reconnect backoff for a server that went away, a field-name view of an input tuple
(storm's ``tuple.getValueByField``), and a stable assignment of named partitions (files) to tasks.

All pure (an injected clock where time matters); candidates to move into ``base``.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from heron_py.connectors.base import ConnectorConfigError, RetryPolicy


def config_error(where: str, key: str, expected: str, found: Any) -> ConnectorConfigError:
    return ConnectorConfigError(f"{where}: config {key}: expected {expected}, found {found!r}")


def opt_int(conf: dict[str, Any], where: str, key: str, default: int, low: int) -> int:
    v = conf.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, str)) or not str(v).lstrip("-").isdigit() or int(v) < low:
        raise config_error(where, key, f"an integer >= {low}", v)
    return int(v)


def opt_bool(conf: dict[str, Any], where: str, key: str, default: bool) -> bool:
    v = conf.get(key, default)
    if isinstance(v, bool):
        return v
    if str(v).lower() in ("true", "false"):
        return str(v).lower() == "true"
    raise config_error(where, key, "true or false", v)


def opt_str(conf: dict[str, Any], where: str, key: str, default: str | None) -> str | None:
    v = conf.get(key, default)
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise config_error(where, key, "a non-empty string", v)
    return v


def opt_fields(conf: dict[str, Any], where: str, key: str, default: Sequence[str]) -> tuple[str, ...]:
    """A list of names, or one comma-separated string of them."""
    v = conf.get(key, list(default))
    if isinstance(v, str):
        v = [s.strip() for s in v.split(",") if s.strip()]
    if not isinstance(v, (list, tuple)) or not v or not all(isinstance(s, str) and s for s in v):
        raise config_error(where, key, "a non-empty list of names", v)
    return tuple(v)


def retry_policy(conf: dict[str, Any], where: str, prefix: str, initial_ms: int = 0) -> RetryPolicy:
    """``PREFIX.retry.initial.delay.ms``, ``PREFIX.retry.max.delay.ms``, ``PREFIX.max.retries``,
    the names the Kafka spout uses, for a tuple's replays after a fail."""
    return RetryPolicy(initial_s=opt_int(conf, where, f"{prefix}.retry.initial.delay.ms", initial_ms, 0) / 1000.0,
                       multiplier=2.0,
                       max_delay_s=opt_int(conf, where, f"{prefix}.retry.max.delay.ms", 10_000, 0) / 1000.0,
                       max_retries=opt_int(conf, where, f"{prefix}.max.retries", -1, -1))


@dataclass
class LogThrottle:
    """The same line at most once per ``period_s`` (a server down for minutes is one line per
    period, not one per poll); a different line goes out at once."""

    clock: Callable[[], float]
    period_s: float = 10.0
    _last: dict[str, float] = field(default_factory=dict)

    def should_log(self, line: str) -> bool:
        now = self.clock()
        at = self._last.get(line)
        if at is not None and now - at < self.period_s:
            return False
        if len(self._last) > 1000:  # bounded: many distinct lines forget the oldest
            self._last.clear()
        self._last[line] = now
        return True


@dataclass
class Reconnect:
    """A connection's state after errors: ``failed(now)`` → seconds until the next try (the
    policy's exponential backoff), ``ready(now)`` whether a try is due, ``ok()`` after a success.
    ``errors`` counts every failure (a metric), ``down_since`` is when the outage began."""

    policy: RetryPolicy = field(default_factory=lambda: RetryPolicy(initial_s=0.1, max_delay_s=5.0))
    failures: int = 0
    errors: int = 0
    next_try: float = 0.0
    down_since: float | None = None

    def ready(self, now: float) -> bool:
        return now >= self.next_try

    def failed(self, now: float) -> float:
        self.failures += 1
        self.errors += 1
        if self.down_since is None:
            self.down_since = now
        delay = self.policy.delay(self.failures)
        self.next_try = now + delay
        return delay

    def ok(self) -> bool:
        """True when this success ended an outage."""
        was_down = self.failures > 0
        self.failures, self.next_try, self.down_since = 0, 0.0, None
        return was_down


class TupleFields:
    """Field names of input tuples, per (component, stream), from the topology the context
    holds: ``get(tup, "word")`` is Storm's ``getValueByField`` (None when the field is absent)."""

    def __init__(self, context: Any) -> None:
        self.context = context
        self._fields: dict[tuple[str, str], tuple[str, ...]] = {}

    def names(self, tup: Any) -> tuple[str, ...]:
        key = (tup.component, tup.stream)
        f = self._fields.get(key)
        if f is None:
            comp = self.context.topology.component(tup.component)
            stream = comp.output(tup.stream) if comp is not None else None
            f = tuple(stream.fields) if stream is not None else ()
            self._fields[key] = f
        return f

    def get(self, tup: Any, name: str) -> Any:
        fields = self.names(tup)
        return tup.values[fields.index(name)] if name in fields else None

    def as_dict(self, tup: Any) -> dict[str, Any]:
        return dict(zip(self.names(tup), tup.values, strict=False))


def source_acking(conf: dict[str, Any]) -> bool:
    """Whether the engine acks a source's tuples: only when ``ReliabilityConfig`` says acking
    (ATLEAST_ONCE, or Storm's acker setting outside EFFECTIVELY_ONCE). Every source decides with
    this one rule: tracking ids the engine never acks would stall its commits."""
    from heron_py.common.config import ReliabilityConfig  # the engine's config, only when a source starts

    return ReliabilityConfig.from_config(conf).acking


def stable_owner(name: str, tasks: int) -> int:
    """The task index that owns a named partition: crc32, so the owner of a file does not change
    when other files appear (a sorted round-robin would move files between tasks)."""
    return zlib.crc32(name.encode("utf-8")) % tasks


def component_where(kind: str, context: Any) -> str:
    return f"{kind} '{context.get_component_id()}' task {context.get_task_id()}"
