"""The health manager's settings: the ``heron_py.autoscale.*`` keys of a topology's config,
parsed once into a frozen dataclass.

Each key's name, kind, default, bound and doc are the engine's config table's
(heron_py/common/config.py), and each is parsed by its ``Key``; what a kind and a lower bound
cannot say (a scale factor above 1, a share up to 1, the ``comp:N,...`` syntax, a minimum not
above its maximum, the components named being the topology's) is checked here, in the table's
words: ``config KEY: expected WHAT, found VALUE``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from heron_py.common.config import (
    AUTOSCALE_BACKPRESSURE_THRESHOLD,
    AUTOSCALE_BLACKLIST,
    AUTOSCALE_COOLDOWN,
    AUTOSCALE_ENABLED,
    AUTOSCALE_IDLE_THRESHOLD,
    AUTOSCALE_INTERVAL,
    AUTOSCALE_MAX_PARALLELISM,
    AUTOSCALE_MAX_SCALE_FACTOR,
    AUTOSCALE_MIN_PARALLELISM,
    AUTOSCALE_TARGET_RATE,
    AUTOSCALE_WINDOW,
    Key,
)
from heron_py.common.config import ConfigError as ConfigError  # raised here: importable from here

T = TypeVar("T")

# what each check beyond the table's kind and bound expects
COUNTS = "an integer >= 1, or 'comp:N,...' with each component once and each N an integer >= 1"
RATES = "'spout:rate,...' with each source component once and each rate a number of records/s > 0"


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
            enabled=bool(AUTOSCALE_ENABLED.parse(cfg)),
            interval_secs=float(AUTOSCALE_INTERVAL.parse(cfg)),
            window_secs=float(AUTOSCALE_WINDOW.parse(cfg)),
            cooldown_secs=float(AUTOSCALE_COOLDOWN.parse(cfg)),
            max_scale_factor=float(AUTOSCALE_MAX_SCALE_FACTOR.parse(cfg)),
            target_rates=_rates(cfg),
            min_parallelism=_per_component(cfg, AUTOSCALE_MIN_PARALLELISM, AT_LEAST_ONE),
            max_parallelism=_per_component(cfg, AUTOSCALE_MAX_PARALLELISM, UNBOUNDED),
            backpressure_threshold=float(AUTOSCALE_BACKPRESSURE_THRESHOLD.parse(cfg)),
            idle_threshold=float(AUTOSCALE_IDLE_THRESHOLD.parse(cfg)),
            blacklist_secs=float(AUTOSCALE_BLACKLIST.parse(cfg)))
        out._check_min_below_max(cfg)
        return out

    def target_rate(self, component: str) -> float | None:
        return dict(self.target_rates).get(component)

    def check_components(self, components: Collection[str], spouts: Collection[str]) -> None:
        """Every component the settings name is one of the topology's (a target rate: a spout's)."""
        for name, _ in self.target_rates:
            if name not in spouts:
                raise AUTOSCALE_TARGET_RATE.error(name, f"source components ({', '.join(sorted(spouts))})")
        for key, per in ((AUTOSCALE_MIN_PARALLELISM, self.min_parallelism),
                         (AUTOSCALE_MAX_PARALLELISM, self.max_parallelism)):
            for name, _ in per.named:
                if name not in components:
                    raise key.error(name, f"components of the topology ({', '.join(sorted(components))})")

    def _check_min_below_max(self, cfg: Mapping[str, Any]) -> None:
        names = {n for n, _ in self.min_parallelism.named} | {n for n, _ in self.max_parallelism.named}
        for name in sorted(names) or [""]:
            lo, hi = self.min_parallelism.of(name), self.max_parallelism.of(name)
            if lo is not None and hi is not None and lo > hi:
                raise AUTOSCALE_MIN_PARALLELISM.error(
                    cfg.get(AUTOSCALE_MIN_PARALLELISM.name),
                    f"at most {AUTOSCALE_MAX_PARALLELISM.name} ({hi}{f' for {name}' if name else ''})")


def _finite(text: str) -> float | None:
    """One number of the ``comp:N,...`` syntax; None for anything else."""
    try:
        x = float(text)
    except ValueError:
        return None
    return x if math.isfinite(x) else None


def _count(text: str) -> int | None:
    x = _finite(text)
    return int(x) if x is not None and x == int(x) and x >= 1 else None


def _rate(text: str) -> float | None:
    x = _finite(text)
    return x if x is not None and x > 0 else None


def _named(cfg: Mapping[str, Any], key: Key, text: str, expected: str,
           value_of: Callable[[str], T | None]) -> tuple[tuple[str, T], ...]:
    """'a:1, b:2' as ((a, 1), (b, 2)), sorted by name: each name once, each value what
    ``value_of`` makes of it (None: refused)."""
    out: dict[str, T] = {}
    for item in text.split(","):
        name, colon, value = (part.strip() for part in item.partition(":"))
        x = value_of(value) if colon and name and name not in out else None
        if x is None:
            raise key.error(cfg.get(key.name), expected)
        out[name] = x
    return tuple(sorted(out.items()))


def _rates(cfg: Mapping[str, Any]) -> tuple[tuple[str, float], ...]:
    text = AUTOSCALE_TARGET_RATE.parse(cfg)
    return () if text is None else _named(cfg, AUTOSCALE_TARGET_RATE, str(text), RATES, _rate)


def _per_component(cfg: Mapping[str, Any], key: Key, default: PerComponent) -> PerComponent:
    """One count for every component, or some named ('comp:N,...') and ``default``'s for the rest."""
    value = key.parse(cfg)
    if value is None:
        return default
    one = _count(str(value))
    if one is not None:
        return PerComponent(one)
    return PerComponent(default.default, _named(cfg, key, str(value), COUNTS, _count))
