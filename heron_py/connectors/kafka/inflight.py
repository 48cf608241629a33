"""The KafkaBolt's pure core: which inputs wait for a delivery report, since when, and when the
producer must be rebuilt. No I/O, no clock of its own (``now`` is passed in).

Why a rebuild rule at all: librdkafka's idempotent producer keeps a producer id (PID) and
per-partition sequence numbers that the broker must know. A broker restarted with its state
lost (Tansu in memory, a wiped Kafka cluster) answers every produce with UNKNOWN_PRODUCER_ID;
librdkafka then bumps the epoch locally and sends again, forever (it judges there is "no risk
of duplication", so the error is neither fatal nor reported: only ``debug=eos`` shows it).
Nothing is delivered until the records time out (``message.timeout.ms``), and the next ones
loop the same way. Only a new producer, which asks the new broker for a PID, delivers again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# librdkafka's local error codes (confluent_kafka.KafkaError), kept here so the rule is pure
MSG_TIMED_OUT = -192  # _MSG_TIMED_OUT: no delivery within message.timeout.ms
PURGE_QUEUE = -152  # _PURGE_QUEUE: a record purged by our own rebuild
PURGE_INFLIGHT = -151  # _PURGE_INFLIGHT


def rebuild_reason(code: int, fatal: bool, text: str) -> str | None:
    """Why a delivery error (or an error_cb error) means the producer must be rebuilt, or None.

    A fatal error leaves the producer unusable by librdkafka's own contract. A timed-out record
    is how the silent UNKNOWN_PRODUCER_ID loop (module docstring) surfaces; it also ends a long
    broker freeze, where a new producer costs nothing more than a reconnection it needs anyway."""
    if fatal:
        return f"fatal producer error: {text}"
    if code == MSG_TIMED_OUT:
        return f"a record had no delivery report within message.timeout.ms ({text})"
    return None


def rebuild_after_poll(why: str | None, waiting: InFlight, now: float, backstop_s: float) -> str | None:
    """After a poll: the reason a callback set, else the backstop's when the oldest record has
    had no report for ``backstop_s`` (a producer that reports nothing at all), else None."""
    if why is None and waiting.overdue(now, backstop_s):
        return f"no delivery report for over {backstop_s:g} s"
    return why


@dataclass
class InFlight:
    """Inputs produced and not yet reported, by a sequence id the delivery callback carries.

    ``pop`` returns None for an id already taken (a report arriving after ``take_all`` failed
    its input at a rebuild), so an input is acked or failed once. The oldest send time is
    found in O(1) amortised: ids go into ``_order`` with their send time in send order, and
    reported ones are skipped lazily from its front. The map holds the input alone: one object
    fewer per record in flight, for the garbage collector to walk, than an (input, time) pair."""

    _items: dict[int, Any] = field(default_factory=dict)
    _order: deque[tuple[int, float]] = field(default_factory=deque)
    _next: int = 0

    def add(self, item: Any, now: float) -> int:
        self._next = n = self._next + 1
        self._items[n] = item
        self._order.append((n, now))
        return n

    def pop(self, ident: int) -> Any | None:
        return self._items.pop(ident, None)

    def take_all(self) -> list[Any]:
        """Every waiting input, oldest first; the tracker is empty after."""
        out = list(self._items.values())
        self._items.clear()
        self._order.clear()
        return out

    def oldest_sent_at(self) -> float | None:
        order, items = self._order, self._items
        while order and order[0][0] not in items:
            order.popleft()
        return order[0][1] if order else None

    def overdue(self, now: float, limit_s: float) -> bool:
        """Whether the oldest waiting input has waited longer than ``limit_s``: the backstop
        for a producer that reports nothing at all (librdkafka reports a timeout first)."""
        oldest = self.oldest_sent_at()
        return oldest is not None and now - oldest > limit_s

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items.values())
