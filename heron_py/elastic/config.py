"""The health manager's settings: the ``heron_py.autoscale.*`` keys of a topology's config,
parsed once into a frozen dataclass.

A value may be heronpy's sanitized string ("30", "true") or a Python value, as in the engine's
config table. A bad value is one line: ``topology config KEY: expected WHAT, found VALUE``.
``KEYS`` lists (name, default, doc) so that the shared config table can register them.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

PREFIX = "heron_py.autoscale."
ENABLED = PREFIX + "enabled"
INTERVAL = PREFIX + "interval.secs"
WINDOW = PREFIX + "window.secs"
COOLDOWN = PREFIX + "cooldown.secs"
MAX_SCALE_FACTOR = PREFIX + "max.scale.factor"
TARGET_RATE = PREFIX + "target.rate"
MIN_PARALLELISM = PREFIX + "min.parallelism"
MAX_PARALLELISM = PREFIX + "max.parallelism"
BACKPRESSURE_THRESHOLD = PREFIX + "backpressure.threshold"
IDLE_THRESHOLD = PREFIX + "idle.threshold"
BLACKLIST = PREFIX + "blacklist.secs"

KEYS: tuple[tuple[str, Any, str], ...] = (
    (ENABLED, False, "the health manager resizes the topology's components from their metrics; off: it only "
                     "reports its diagnoses"),
    (INTERVAL, 30.0, "seconds between two of the health manager's decisions"),
    (WINDOW, 30.0, "seconds of metrics each decision reads (the counters' increase over them)"),
    (COOLDOWN, 60.0, "seconds after an action before the next one; a full window after the new plan is "
                     "awaited too"),
    (MAX_SCALE_FACTOR, 2.0, "the most a component's parallelism changes in one step: at most this many times "
                            "larger or smaller (and always by one task at least)"),
    (TARGET_RATE, None, "records/s each source component must sustain, as 'spout:rate,spout:rate'; unset: keep "
                        "up with the input the sources read"),
    (MIN_PARALLELISM, 1, "the fewest tasks of a component: one number for all, or 'comp:N,comp:N' (1 for the "
                         "others)"),
    (MAX_PARALLELISM, None, "the most tasks of a component: one number for all, or 'comp:N,comp:N'; unset: "
                            "topology.component.max.parallelism (its key groups) only"),
    (BACKPRESSURE_THRESHOLD, 0.1, "the share of the window a stream manager spends in backpressure above which "
                                  "it is a symptom"),
    (IDLE_THRESHOLD, 0.3, "the share of the window a task spends in useful work below which, for all of a "
                          "component's tasks and without backpressure, the component is over-provisioned"),
    (BLACKLIST, 600.0, "seconds an action that did not help is not repeated for its component"),
)


class ConfigError(ValueError):
    pass


@dataclass(frozen=True)
class PerComponent:
    """A number per component: one for all (``default``), or some named and the rest ``default``."""

    default: int | None
    named: tuple[tuple[str, int], ...] = ()

    def of(self, component: str) -> int | None:
        return dict(self.named).get(component, self.default)


AT_LEAST_ONE = PerComponent(1)
UNBOUNDED = PerComponent(None)


@dataclass(frozen=True)
class AutoscaleConfig:
    enabled: bool = False
    interval_secs: float = 30.0
    window_secs: float = 30.0
    cooldown_secs: float = 60.0
    max_scale_factor: float = 2.0
    target_rates: tuple[tuple[str, float], ...] = ()  # empty: keep up with the input
    min_parallelism: PerComponent = AT_LEAST_ONE
    max_parallelism: PerComponent = UNBOUNDED
    backpressure_threshold: float = 0.1
    idle_threshold: float = 0.3
    blacklist_secs: float = 600.0

    @staticmethod
    def parse(cfg: Mapping[str, Any]) -> AutoscaleConfig:
        out = AutoscaleConfig(
            enabled=_bool(cfg, ENABLED, False),
            interval_secs=_number(cfg, INTERVAL, 30.0, "a number of seconds > 0", lambda x: x > 0),
            window_secs=_number(cfg, WINDOW, 30.0, "a number of seconds > 0", lambda x: x > 0),
            cooldown_secs=_number(cfg, COOLDOWN, 60.0, "a number of seconds >= 0", lambda x: x >= 0),
            max_scale_factor=_number(cfg, MAX_SCALE_FACTOR, 2.0, "a number > 1", lambda x: x > 1),
            target_rates=_rates(cfg),
            min_parallelism=_per_component(cfg, MIN_PARALLELISM, AT_LEAST_ONE),
            max_parallelism=_per_component(cfg, MAX_PARALLELISM, UNBOUNDED),
            backpressure_threshold=_number(cfg, BACKPRESSURE_THRESHOLD, 0.1, "a number from 0 to 1",
                                           lambda x: 0 <= x <= 1),
            idle_threshold=_number(cfg, IDLE_THRESHOLD, 0.3, "a number from 0 to 1", lambda x: 0 <= x <= 1),
            blacklist_secs=_number(cfg, BLACKLIST, 600.0, "a number of seconds >= 0", lambda x: x >= 0))
        out._check_min_below_max(cfg)
        return out

    def target_rate(self, component: str) -> float | None:
        return dict(self.target_rates).get(component)

    def check_components(self, components: Collection[str], spouts: Collection[str]) -> None:
        """Every component the settings name is one of the topology's (a target rate: a spout's)."""
        for name, _ in self.target_rates:
            if name not in spouts:
                raise ConfigError(f"topology config {TARGET_RATE}: expected source components "
                                  f"({', '.join(sorted(spouts))}), found {name!r}")
        for key, per in ((MIN_PARALLELISM, self.min_parallelism), (MAX_PARALLELISM, self.max_parallelism)):
            for name, _ in per.named:
                if name not in components:
                    raise ConfigError(f"topology config {key}: expected components of the topology "
                                      f"({', '.join(sorted(components))}), found {name!r}")

    def _check_min_below_max(self, cfg: Mapping[str, Any]) -> None:
        names = {n for n, _ in self.min_parallelism.named} | {n for n, _ in self.max_parallelism.named}
        for name in sorted(names) or [""]:
            lo, hi = self.min_parallelism.of(name), self.max_parallelism.of(name)
            if lo is not None and hi is not None and lo > hi:
                raise ConfigError(f"topology config {MIN_PARALLELISM}: expected at most {MAX_PARALLELISM} "
                                  f"({hi}{f' for {name}' if name else ''}), found {cfg.get(MIN_PARALLELISM)!r}")


def _error(key: str, expected: str, raw: Any) -> ConfigError:
    return ConfigError(f"topology config {key}: expected {expected}, found {raw!r}")


def _bool(cfg: Mapping[str, Any], key: str, default: bool) -> bool:
    raw = cfg.get(key)
    if raw is None or raw == "":
        return default
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise _error(key, "true or false", raw)


def _as_float(raw: Any) -> float | None:
    """A finite number from a Python number or its string; None for anything else."""
    if isinstance(raw, bool):
        return None
    try:
        x = float(raw)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _number(cfg: Mapping[str, Any], key: str, default: float, expected: str, ok: Any) -> float:
    raw = cfg.get(key)
    if raw is None or raw == "":
        return default
    x = _as_float(raw)
    if x is None or not ok(x):
        raise _error(key, expected, raw)
    return x


def _as_count(raw: Any) -> int | None:
    x = _as_float(raw)
    return int(x) if x is not None and x == int(x) and x >= 1 else None


def _pairs(raw: Any) -> list[tuple[str, str]] | None:
    """'a:1, b:2' as [(a, '1'), (b, '2')]; None if it is not that shape or names one twice."""
    if not isinstance(raw, str):
        return None
    out = []
    for item in raw.split(","):
        name, colon, value = item.partition(":")
        if not colon or not name.strip() or not value.strip():
            return None
        out.append((name.strip(), value.strip()))
    return out if len({n for n, _ in out}) == len(out) else None


def _rates(cfg: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    raw = cfg.get(TARGET_RATE)
    if raw is None or raw == "":
        return ()
    expected = "'spout:rate,...' with each source component once and each rate a number of records/s > 0"
    pairs = _pairs(raw)
    if pairs is None:
        raise _error(TARGET_RATE, expected, raw)
    out = []
    for name, value in pairs:
        x = _as_float(value)
        if x is None or x <= 0:
            raise _error(TARGET_RATE, expected, raw)
        out.append((name, x))
    return tuple(sorted(out))


def _per_component(cfg: Mapping[str, Any], key: str, default: PerComponent) -> PerComponent:
    raw = cfg.get(key)
    if raw is None or raw == "":
        return default
    expected = "an integer >= 1, or 'comp:N,...' with each component once and each N an integer >= 1"
    one = _as_count(raw)
    if one is not None:
        return PerComponent(one)
    pairs = _pairs(raw)
    if pairs is None:
        raise _error(key, expected, raw)
    named = []
    for name, value in pairs:
        n = _as_count(value)
        if n is None:
            raise _error(key, expected, raw)
        named.append((name, n))
    return PerComponent(default.default, tuple(sorted(named)))
