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

``AckService`` is the part the stream manager talks to: it turns ACK_BATCH frames into
tracker updates and resolved roots into one ACK_RESULT frame per spout task, and rotates the
buckets. It does no I/O: frames leave through the ``send`` callback it is given (which sends
them, or holds them while the spout is not connected).
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Iterator
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


class XorTracker:
    def __init__(self, buckets: int = 3) -> None:
        RotatingMap.check(buckets)
        self._buckets = buckets
        # per spout task: (live roots, roots resolved recently), keyed by the root alone, so a
        # record costs no (task, root) key to build and hash. A late ack for a resolved root
        # must not resurrect an entry (which would later time out and call fail() for a tuple
        # that was already acked), hence the second map.
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
                            done[0][root] = 1
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


class AckService:
    # 3 buckets rotated every T/2: a root times out between T and 1.5 T after it was seen
    BUCKETS = 3

    def __init__(self, send: Callable[[int, bytes], None], log: logging.Logger) -> None:
        self.tracker = XorTracker(buckets=self.BUCKETS)
        self._send = send
        self._log = log

    @property
    def pending(self) -> int:
        return self.tracker.pending

    def on_ack_batch(self, frame: bytes) -> None:
        """Records for one of our spout tasks: update the XOR state, report resolved roots."""
        spout = batch_dest(frame)
        resolved, unknown = self.tracker.apply(spout, memoryview(frame)[BODY_OFFSET:])
        for kind in unknown:
            self._log.warning("ack record of unknown kind %d for task %d; ignored", kind, spout)
        if resolved:
            self._send(spout, result_frame(spout, resolved))

    def rotate(self) -> None:
        """Times out the oldest bucket's roots."""
        self._send_results(self.tracker.rotate())

    async def run_rotation(self, timeout_s: Callable[[], float],
                           sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Rotates every ``timeout/(buckets-1)`` seconds; the timeout is read each time, so a
        new physical plan's value applies from the next rotation."""
        while True:
            await sleep(timeout_s() / (self.BUCKETS - 1))
            self.rotate()

    def _send_results(self, resolved: list[Resolved]) -> None:
        for task, frame in result_frames(resolved).items():
            self._send(task, frame)
