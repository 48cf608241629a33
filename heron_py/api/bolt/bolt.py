"""heronpy's Bolt: subclass it and implement ``process`` (and ``process_tick`` for ticks)."""

from __future__ import annotations

from typing import Any

from heron_py.api.bolt.base_bolt import BaseBolt


class Bolt(BaseBolt):
    def initialize(self, config: dict[str, Any], context: Any) -> None:
        """Called once in the task before the first ``process``; ``config`` is typed back
        (numbers, booleans) as heronpy does."""

    def process(self, tup: Any) -> None:
        raise NotImplementedError(f"bolt {type(self).__name__} does not implement process()")

    def process_tick(self, tup: Any) -> None:
        """Tick tuples (``topology.tick.tuple.freq.secs``) arrive here, not in ``process``."""
