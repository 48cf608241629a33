"""XOR ack bookkeeping for the spouts of one container (Storm's acker algorithm), pure.

Every tuple gets a random 64-bit key. For a spout tuple (a root), the tracker holds one
64-bit value: the XOR of the keys of every tuple in its tree that was created and not yet
acked. A spout's emit XORs in the keys it sent; a bolt's ack of tuple t XORs in t's key and
the keys of the tuples it emitted anchored to t. Each key enters the value exactly twice
(created, acked), so the value is zero exactly when the whole tree is acked — with a
chance of 2^-64 per update of reaching zero early.

Entries live in generations (buckets): ``rotate()`` drops the oldest, and its roots have
timed out. With ``n`` buckets rotated every ``timeout/(n-1)`` seconds, a root
times out between ``timeout`` and ``timeout * n/(n-1)`` seconds after it was first seen
(updates do not refresh it, as in Storm).

One tracker for every driver: the stream manager's ``AckService`` (``stream_manager/acking.py``)
feeds it ACK_BATCH frames and rotates it on a timer; the test harness wraps it in
``ClockedTracker``, whose buckets are opened and dropped on its manual clock so a root times out
at exactly ``timeout`` after it was first seen. A hot-path module (``heron_py.hotpath``); the
stream manager's hottest loop with acking on, a record's update, is ``RootTable.apply``
(``heron_py.acking.roots``, compiled from its typed twin ``roots.pyx``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from heron_py.acking.root_errors import check_buckets
from heron_py.acking.roots import RootTable
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


class XorTracker:
    """Per spout task, a ``RootTable`` (``heron_py.acking.roots``): its live roots and the roots
    failed or timed out recently, keyed by the root alone, so a record costs no (task, root) key
    to build and hash. After a fail or a timeout the rest of the tree's records still arrive;
    they must not resurrect an entry (which would time out later), hence the resolved roots. An
    acked root needs no entry there: every key of its tree was XORed in twice, so no record of
    it is left to come (a user's second ack of one tuple is the exception: its entry times out
    unseen, since the spout no longer holds the root). At 40,000 roots/s that would be a million
    acked roots remembered for a timeout."""

    def __init__(self, buckets: int) -> None:
        """``buckets``: the generations a root lives through before it times out (the stream
        manager's rotation: between (buckets - 1) and buckets rotations)."""
        check_buckets(buckets)
        self._buckets = buckets
        self._tasks: dict[int, RootTable] = {}

    def table(self, spout_task: int) -> RootTable:
        t = self._tasks.get(spout_task)
        if t is None:
            t = self._tasks[spout_task] = RootTable(self._buckets)
        return t

    @property
    def pending(self) -> int:
        return sum(t.live for t in self._tasks.values())

    def update(self, spout_task: int, root: int, value: int) -> Resolved | None:
        """XORs ``value`` into the root's entry (creating it); returns the root if it completed.
        One record through ``apply``, so the two cannot disagree."""
        resolved, _ = self.apply(spout_task, ACK_RECORD.pack(ACK_ACK, root, value & MASK64))
        return Resolved(spout_task, root, Outcome.ACKED) if resolved else None

    def apply_body(self, spout_task: int, body: bytes | memoryview, results: bytearray) -> list[int]:
        """One ACK_BATCH body for ``spout_task`` (the stream manager's hottest loop with acking
        on): an ACK_RESULT record (outcome, root) appended to ``results`` per root resolved, in
        order. Returns the record kinds it did not know. A body that is not whole records is
        refused whole (ValueError, ``root_errors.body_error``)."""
        return self.table(spout_task).apply(body, results)

    def apply(self, spout_task: int, body: bytes | memoryview) -> tuple[list[tuple[int, int]], list[int]]:
        """``apply_body`` with the resolved roots as (outcome, root) pairs."""
        results = bytearray()
        unknown = self.apply_body(spout_task, body, results)
        return list(RESULT_RECORD.iter_unpack(results)), unknown

    def fail(self, spout_task: int, root: int) -> Resolved | None:
        if not self.table(spout_task).fail(root):
            return None
        return Resolved(spout_task, root, Outcome.FAILED)

    def rotate(self) -> list[Resolved]:
        return [Resolved(task, root, Outcome.TIMED_OUT) for task, t in self._tasks.items() for root in t.rotate()]

    # A driver that times roots out on its own clock (ClockedTracker) opens and drops
    # generations apart instead of rotating: every table of every task keeps the same number of
    # generations, the newest first, so bucket i is one generation across tasks.
    def grow(self) -> None:
        """A new newest bucket in every table, none dropped."""
        self._buckets += 1
        for t in self._tasks.values():
            t.grow()

    def shrink(self) -> list[Resolved]:
        """Drops every table's oldest bucket (at least 2 stay): its live roots have timed out and,
        as in ``rotate``, are remembered as resolved so a late ack does not resurrect them."""
        check_buckets(self._buckets - 1)
        self._buckets -= 1
        return [Resolved(task, root, Outcome.TIMED_OUT) for task, t in self._tasks.items() for root in t.shrink()]

    def live_in(self, bucket: int) -> int:
        """How many live roots bucket ``bucket`` (0: the newest) holds, over every spout task."""
        return sum(t.live_in(bucket) for t in self._tasks.values())


_OUTCOME = {Outcome.ACKED: RESULT_ACKED, Outcome.FAILED: RESULT_FAILED, Outcome.TIMED_OUT: RESULT_TIMED_OUT}


def result_frame(spout_task: int, body: bytes | bytearray) -> bytes:
    """One ACK_RESULT frame for a spout task around a body of RESULT records (outcome, root), as
    the tracker's ``apply_body`` writes them."""
    return encode_batch_frame(spout_task, 0, body, MsgType.ACK_RESULT, len(body) // RESULT_RECORD.size)


def result_frames(resolved: list[Resolved]) -> dict[int, bytes]:
    """One ACK_RESULT frame per spout task, its records in the order the roots resolved."""
    by_task: dict[int, bytearray] = {}
    for r in resolved:
        by_task.setdefault(r.spout_task, bytearray()).extend(RESULT_RECORD.pack(_OUTCOME[r.outcome], r.root))
    return {task: result_frame(task, body) for task, body in by_task.items()}


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
        self._results: dict[int, bytearray] = {}  # per spout task: its RESULT records, in order

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
        results = self._results.setdefault(spout_task, bytearray())
        unknown = self.tracker.apply_body(spout_task, memoryview(frame)[BODY_OFFSET:], results)
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
                self._results.setdefault(r.spout_task, bytearray()).extend(RESULT_RECORD.pack(RESULT_TIMED_OUT, r.root))

    def take_results(self) -> dict[int, bytes]:
        """One ACK_RESULT frame per spout task, its roots in the order they resolved."""
        results, self._results = self._results, {}
        return {task: result_frame(task, body) for task, body in results.items() if body}
