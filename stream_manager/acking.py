"""XOR ack bookkeeping for the spouts of one container (Storm's acker algorithm), pure.

Every tuple gets a random 64-bit key. For a spout tuple (a root), the tracker holds one
64-bit value: the XOR of the keys of every tuple in its tree that was created and not yet
acked. A spout's emit XORs in the keys it sent; a bolt's ack of tuple t XORs in t's key and
the keys of the tuples it emitted anchored to t. Each key enters the value exactly twice
(created, acked), so the value is zero exactly when the whole tree is acked — with a
chance of 2^-64 per update of reaching zero early.

Entries live in a rotating map of buckets: ``rotate()`` drops the oldest bucket, and its
roots have timed out. With ``n`` buckets rotated every ``timeout/(n-1)`` seconds, a root
times out between ``timeout`` and ``timeout * n/(n-1)`` seconds after it was first seen
(updates do not refresh it, as in Storm).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

MASK64 = (1 << 64) - 1


class Outcome(enum.Enum):
    ACKED = "acked"
    FAILED = "failed"
    TIMED_OUT = "timed_out"


@dataclass(frozen=True)
class Resolved:
    spout_task: int
    root: int
    outcome: Outcome


class RotatingMap:
    """Key → int value in ``n`` generations; lookups search newest first."""

    def __init__(self, buckets: int = 3) -> None:
        if buckets < 2:
            raise ValueError(f"rotating map needs at least 2 buckets, found {buckets}")
        self._buckets: list[dict[tuple[int, int], int]] = [{} for _ in range(buckets)]

    def __len__(self) -> int:
        return sum(len(b) for b in self._buckets)

    def __iter__(self) -> Iterator[tuple[int, int]]:
        for b in self._buckets:
            yield from b

    def find(self, key: tuple[int, int]) -> dict[tuple[int, int], int] | None:
        for b in self._buckets:
            if key in b:
                return b
        return None

    def put_new(self, key: tuple[int, int], value: int) -> None:
        self._buckets[0][key] = value

    def rotate(self) -> dict[tuple[int, int], int]:
        """Drops the oldest generation and returns it (its entries have timed out)."""
        expired = self._buckets.pop()
        self._buckets.insert(0, {})
        return expired


class XorTracker:
    def __init__(self, buckets: int = 3) -> None:
        self._map = RotatingMap(buckets)
        # roots resolved recently: a late ack for them must not resurrect an entry (which
        # would later time out and call fail() for a tuple that was already acked)
        self._done = RotatingMap(buckets)

    @property
    def pending(self) -> int:
        return len(self._map)

    def update(self, spout_task: int, root: int, value: int) -> Resolved | None:
        """XORs ``value`` into the root's entry (creating it); returns the root if it completed."""
        key = (spout_task, root)
        if self._done.find(key) is not None:
            return None
        bucket = self._map.find(key)
        if bucket is None:
            if value == 0:
                return None
            self._map.put_new(key, value & MASK64)
            return None
        v = bucket[key] ^ value
        if v == 0:
            del bucket[key]
            self._done.put_new(key, 1)
            return Resolved(spout_task, root, Outcome.ACKED)
        bucket[key] = v
        return None

    def fail(self, spout_task: int, root: int) -> Resolved | None:
        key = (spout_task, root)
        if self._done.find(key) is not None:
            return None
        bucket = self._map.find(key)
        if bucket is not None:
            del bucket[key]
        # a fail for a root we never saw (its init is still on the way) still fails it
        self._done.put_new(key, 1)
        return Resolved(spout_task, root, Outcome.FAILED)

    def rotate(self) -> list[Resolved]:
        self._done.rotate()
        expired = self._map.rotate()
        out = []
        for (task, root) in expired:
            self._done.put_new((task, root), 1)
            out.append(Resolved(task, root, Outcome.TIMED_OUT))
        return out
