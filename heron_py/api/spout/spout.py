"""heronpy's Spout: subclass it and implement ``next_tuple`` (and the others you need)."""

from __future__ import annotations

from typing import Any

from heron_py.api.spout.base_spout import BaseSpout


class Spout(BaseSpout):
    def initialize(self, config: dict[str, Any], context: Any) -> None:
        """Called once in the task before the first ``next_tuple``; ``config`` is typed back
        (numbers, booleans) as heronpy does."""

    def next_tuple(self) -> None:
        raise NotImplementedError(f"spout {type(self).__name__} does not implement next_tuple()")

    def ack(self, tup_id: Any) -> None:
        """The tuple tree emitted with ``tup_id`` was fully processed."""

    def fail(self, tup_id: Any) -> None:
        """The tuple tree emitted with ``tup_id`` failed or timed out."""

    def activate(self) -> None:
        pass

    def deactivate(self) -> None:
        pass

    def close(self) -> None:
        pass
