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

One tracker for every driver: the stream manager's ``AckService`` (``stream_manager/acking.py``)
feeds it ACK_BATCH frames and rotates it on a timer; the test harness wraps it in
``ClockedTracker``, whose buckets are opened and dropped on its manual clock so a root times out
at exactly ``timeout`` after it was first seen. A hot-path module (``heron_py.hotpath``):
``XorTracker.apply`` is the stream manager's hottest loop with acking on.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from heron_py.common.framing import (
    ACK_ACK,
    ACK_FAIL,
    ACK_INIT,
    ACK_RECORD,
    BODY_OFFSET,
    RESULT_ACKED,
    RESULT_FAILED,
    RESULT_RECORD,
    RESULT_TIMED_OUT,
    MsgType,
    batch_dest,
    encode_batch_frame,
)

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
    """Root → int value in ``n`` generations; lookups search newest first."""

    def __init__(self, buckets: int = 3) -> None:
        self.check(buckets)
        self._buckets: list[dict[int, int]] = [{} for _ in range(buckets)]

    @staticmethod
    def check(buckets: int) -> None:
        if buckets < 2:
            raise ValueError(f"rotating map needs at least 2 buckets, found {buckets}")

    def __len__(self) -> int:
        return sum(len(b) for b in self._buckets)

    def __iter__(self) -> Iterator[int]:
        for b in self._buckets:
            yield from b

    @property
    def buckets(self) -> list[dict[int, int]]:
        """Newest first; rotate() replaces the list's items, so read it anew each time."""
        return self._buckets

    def find(self, key: int) -> dict[int, int] | None:
        for b in self._buckets:
            if key in b:
                return b
        return None

    def put_new(self, key: int, value: int) -> None:
        self._buckets[0][key] = value

    def rotate(self) -> dict[int, int]:
        """Drops the oldest generation and returns it (its entries have timed out)."""
        expired = self._buckets.pop()
        self._buckets.insert(0, {})
        return expired

    def grow(self) -> None:
        """A new newest generation, none dropped (``XorTracker.grow``)."""
        self._buckets.insert(0, {})

    def drop_oldest(self) -> dict[int, int]:
        """Drops the oldest generation and returns it, keeping at least 2 (``XorTracker.shrink``)."""
        if len(self._buckets) <= 2:
            raise ValueError(f"rotating map keeps at least 2 buckets: cannot drop one of {len(self._buckets)}")
        return self._buckets.pop()


class XorTracker:
    def __init__(self, buckets: int = 3) -> None:
        RotatingMap.check(buckets)
        self._buckets = buckets
        # per spout task: (live roots, roots failed or timed out recently), keyed by the root
        # alone, so a record costs no (task, root) key to build and hash. After a fail or a
        # timeout the rest of the tree's records still arrive; they must not resurrect an entry
        # (which would time out later), hence the second map. An acked root needs no entry
        # there: every key of its tree was XORed in twice, so no record of it is left to come
        # (a user's second ack of one tuple is the exception: its entry times out unseen, since
        # the spout no longer holds the root). At 40,000 roots/s that map would hold a million
        # acked roots, 30 MB and a cache miss per lookup.
        self._tasks: dict[int, tuple[RotatingMap, RotatingMap]] = {}

    def _maps(self, spout_task: int) -> tuple[RotatingMap, RotatingMap]:
        maps = self._tasks.get(spout_task)
        if maps is None:
            maps = self._tasks[spout_task] = (RotatingMap(self._buckets), RotatingMap(self._buckets))
        return maps

    @property
    def pending(self) -> int:
        return sum(len(live) for live, _ in self._tasks.values())

    def update(self, spout_task: int, root: int, value: int) -> Resolved | None:
        """XORs ``value`` into the root's entry (creating it); returns the root if it completed.
        One record through ``apply``, so the two cannot disagree."""
        resolved, _ = self.apply(spout_task, ACK_RECORD.pack(ACK_ACK, root, value & MASK64))
        return Resolved(spout_task, root, Outcome.ACKED) if resolved else None

    def apply(self, spout_task: int, body: bytes | memoryview) -> tuple[list[tuple[int, int]], list[int]]:
        """One ACK_BATCH body for ``spout_task``: ``update`` or ``fail`` per record, inlined (the
        stream manager's hottest loop with acking on). Returns the resolved roots as ACK_RESULT
        records (outcome, root), in the order they resolved, and the kinds it did not know."""
        live_map, done_map = self._maps(spout_task)
        live, done = live_map.buckets, done_map.buckets
        resolved: list[tuple[int, int]] = []
        unknown: list[int] = []
        for kind, root, value in ACK_RECORD.iter_unpack(body):
            if kind in (ACK_ACK, ACK_INIT):
                # a live root is never in done: look there first, it is where nearly all records go
                for bucket in live:
                    old = bucket.get(root)
                    if old is not None:
                        v = old ^ value
                        if v == 0:
                            del bucket[root]
                            resolved.append((RESULT_ACKED, root))
                        else:
                            bucket[root] = v
                        break
                else:
                    if value and not (root in done[0] or any(root in d for d in done[1:])):
                        live[0][root] = value & MASK64
            elif kind == ACK_FAIL:
                r = self.fail(spout_task, root)
                if r is not None:
                    resolved.append((RESULT_FAILED, root))
            else:
                unknown.append(kind)
        return resolved, unknown

    def fail(self, spout_task: int, root: int) -> Resolved | None:
        live, done = self._maps(spout_task)
        if done.find(root) is not None:
            return None
        bucket = live.find(root)
        if bucket is not None:
            del bucket[root]
        # a fail for a root we never saw (its init is still on the way) still fails it
        done.put_new(root, 1)
        return Resolved(spout_task, root, Outcome.FAILED)

    def rotate(self) -> list[Resolved]:
        out = []
        for task, (live, done) in self._tasks.items():
            done.rotate()
            for root in live.rotate():
                done.put_new(root, 1)
                out.append(Resolved(task, root, Outcome.TIMED_OUT))
        return out

    # A driver that times roots out on its own clock (ClockedTracker) opens and drops
    # generations apart instead of rotating: every map of every task keeps the same number of
    # buckets, the newest first, so bucket i is one generation across tasks.
    def grow(self) -> None:
        """A new newest bucket in every map, none dropped."""
        self._buckets += 1
        for live, done in self._tasks.values():
            live.grow()
            done.grow()

    def shrink(self) -> list[Resolved]:
        """Drops every map's oldest bucket (at least 2 stay): its live roots have timed out and,
        as in ``rotate``, are remembered as resolved so a late ack does not resurrect them."""
        RotatingMap.check(self._buckets - 1)
        self._buckets -= 1
        out = []
        for task, (live, done) in self._tasks.items():
            done.drop_oldest()
            for root in live.drop_oldest():
                done.put_new(root, 1)
                out.append(Resolved(task, root, Outcome.TIMED_OUT))
        return out

    def live_in(self, bucket: int) -> int:
        """How many live roots bucket ``bucket`` (0: the newest) holds, over every spout task."""
        return sum(len(live.buckets[bucket]) for live, _ in self._tasks.values())


_OUTCOME = {Outcome.ACKED: RESULT_ACKED, Outcome.FAILED: RESULT_FAILED, Outcome.TIMED_OUT: RESULT_TIMED_OUT}


def result_frame(spout_task: int, records: list[tuple[int, int]]) -> bytes:
    """One ACK_RESULT frame of (outcome, root) records for a spout task, in their order."""
    body = b"".join([RESULT_RECORD.pack(outcome, root) for outcome, root in records])
    return encode_batch_frame(spout_task, 0, body, MsgType.ACK_RESULT, len(records))


def result_frames(resolved: list[Resolved]) -> dict[int, bytes]:
    """One ACK_RESULT frame per spout task, its records in the order the roots resolved."""
    by_task: dict[int, list[tuple[int, int]]] = {}
    for r in resolved:
        by_task.setdefault(r.spout_task, []).append((_OUTCOME[r.outcome], r.root))
    return {task: result_frame(task, recs) for task, recs in by_task.items()}


class ClockedTracker:
    """``XorTracker`` on an injected clock, for a driver that stops time between its steps (the
    test harness): ACK_BATCH frames in, ACK_RESULT frames out per spout task, and a root times
    out at exactly ``timeout_s`` after its first record instead of between T and 1.5 T.

    Each generation (bucket) of the tracker holds the roots first seen at one clock reading:
    before a batch, a clock that moved opens a new generation (or, when the newest holds no live
    root, moves that generation's reading forward, so a clock that moves often without new roots
    adds none), and ``expire`` drops every generation opened ``timeout_s`` or more ago. The
    generations so number the distinct readings with new roots within one timeout. A resolved
    root is remembered for one timeout after it resolved (a late ack of it is ignored), as the
    stream manager's done map does for at least T. Pure."""

    def __init__(self, timeout_s: float, clock: Callable[[], float]) -> None:
        if not timeout_s > 0:
            raise ValueError(f"ack tracker: timeout_s must be above 0 seconds, found {timeout_s}")
        self.timeout_s = timeout_s
        self._clock = clock
        self.tracker = XorTracker(buckets=2)
        now = clock()
        self._opened = [now, now]  # each generation's clock reading, the oldest first
        self._results: dict[int, list[tuple[int, int]]] = {}

    @property
    def pending(self) -> int:
        """Roots neither acked, failed nor timed out."""
        return self.tracker.pending

    @property
    def generations(self) -> int:
        """The tracker's buckets: the distinct readings with new roots within one timeout (2 at least)."""
        return len(self._opened)

    def _open_at(self, now: float) -> None:
        """Makes the newest generation the one read at ``now``: a new one, or the newest moved
        forward when it holds no live root (its resolved roots are then remembered longer,
        which is harmless). Every resolution and first record so lands in a generation read at
        the moment it happened."""
        if now > self._opened[-1]:
            if self.tracker.live_in(0):
                self.tracker.grow()
                self._opened.append(now)
            else:
                self._opened[-1] = now

    def on_ack_batch(self, frame: bytes) -> None:
        """One ACK_BATCH frame for the spout task it is addressed to. A record of an unknown
        kind is a bug of the engine under test: it raises, after the batch's other records."""
        self._open_at(self._clock())
        spout_task = batch_dest(frame)
        resolved, unknown = self.tracker.apply(spout_task, memoryview(frame)[BODY_OFFSET:])
        if resolved:
            self._results.setdefault(spout_task, []).extend(resolved)
        if unknown:
            raise ValueError(f"ACK_BATCH for spout task {spout_task}: record kind {unknown[0]} is not "
                             f"ACK_INIT ({ACK_INIT}), ACK_ACK ({ACK_ACK}) or ACK_FAIL ({ACK_FAIL})")

    def next_deadline(self) -> float | None:
        """When the oldest live root times out; None with none live."""
        newest = len(self._opened) - 1
        for i, opened in enumerate(self._opened):
            if self.tracker.live_in(newest - i):
                return opened + self.timeout_s
        return None

    def expire(self) -> None:
        """Times out the roots first seen ``timeout_s`` or more before the clock's reading."""
        now = self._clock()
        # the roots timed out now are remembered as resolved (so a late ack is ignored) for a
        # whole timeout, as in the stream manager: they go into a generation read now
        self._open_at(now)
        while self._opened[0] + self.timeout_s <= now:
            if len(self._opened) == 2:
                # the tracker keeps 2 generations: a new empty one, opened now, takes the place
                self.tracker.grow()
                self._opened.append(now)
            del self._opened[0]
            for r in self.tracker.shrink():
                self._results.setdefault(r.spout_task, []).append((RESULT_TIMED_OUT, r.root))

    def take_results(self) -> dict[int, bytes]:
        """One ACK_RESULT frame per spout task, its roots in the order they resolved."""
        results, self._results = self._results, {}
        return {task: result_frame(task, records) for task, records in results.items()}
