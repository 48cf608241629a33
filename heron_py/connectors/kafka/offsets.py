"""The Kafka spout's offsets: each assigned partition's committed and fetched positions, and, at
least once, the records in flight, kept per emitted batch ("run") rather than per record.

A fetch answers per partition, so the spout emits a partition's records in batches of consecutive
records in offset order. A batch is a ``Run``: its records, a ``bytearray`` with one byte per
record (set once the record is done: acked, or given up after its retries) and its number. A
record's message id is an int, the run's number shifted left by ``ID_BITS`` plus the record's
index in the run, so that

- an emit builds no key and stores nothing per record (the ids are a ``range``);
- an ack is a shift, a mask and one byte written (the generic ``ReplayableSource`` built a key
  tuple, a dict entry and two set entries per record, and popped them again at the ack: 35 % of
  the at-least-once spout's execution thread in a profile, bench/RESULTS.md);
- the offset a commit may write is found with one ``bytearray.find`` per partition: the first
  record not done in the oldest run that still has one, or one past the last record fetched.

A run emitted as one tuple tree (the default: ``Emitter.emit_root_run``, one root, one entry at
the stream manager's tracker and one result for the whole batch, where a root per record was most
of the at-least-once spout's remaining cost) has one message id of its own, ``run_id``: the run's
number with every index bit set. Its ack marks every record done; its fail fails each record not
done yet, so each is retried on its own, with its own id, by the rules below.

The rules are Storm's (storm-kafka-client's OffsetManager): an offset is committed only when it
and every earlier one of its partition are done; a failed record is emitted again after the
retry policy's backoff, with the same id, and committed past once ``kafka.max.retries`` is spent;
a partition stops taking new records while ``max_uncommitted`` offsets past its commit point are
emitted (counted as the distance from the commit point to the fetched position, which a compacted
partition's gaps make larger than the records: the allowance only errs on the side of waiting).

Without tracking (NO_GUARANTEE, AT_MOST_ONCE, effectively once) only the positions are kept: the
fetched position moves with each poll (``fetched``) and is what a periodic commit writes."""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from heron_py.connectors.base import RetryPolicy, SourceStats

TP = tuple[str, int]
ID_BITS = 32  # a run holds fewer records than this many bits count (a poll's share of a partition)
ID_MASK = (1 << ID_BITS) - 1
WHOLE = ID_MASK  # the index of a run's own id: every record of the run (``run_id``)


def run_id(ids: range) -> int:
    """The message id of a whole run, from the ids ``KafkaOffsets.emitted`` gave its records."""
    return ids.start | WHOLE


class Run:
    """One emitted batch of a partition's records, in offset order, and which of them are done."""

    __slots__ = ("done", "failures", "number", "records", "tp")

    def __init__(self, tp: TP, number: int, records: list[Any]) -> None:
        self.tp = tp
        self.number = number
        self.records = records
        self.done = bytearray(len(records))
        self.failures: dict[int, int] | None = None  # index → failures so far, once one failed

    def first_open(self) -> int:
        """The index of the first record not done, or -1 when every one is."""
        return self.done.find(0)


@dataclass
class Partition:
    """A partition's positions: ``committed`` the next offset to read after a restart (what the
    broker confirmed), ``fetched`` one past the highest offset emitted, ``start`` the first
    offset this task emitted (for the allowance when the committed offset is unknown), and the
    runs that still hold a record not done, oldest first."""

    committed: int
    fetched: int
    start: int = -1
    runs: deque[Run] = field(default_factory=deque)

    def uncommitted(self) -> int:
        """Offsets emitted past the commit point (in flight and done alike), as Storm counts them."""
        return self.fetched - max(self.committed, self.start)


class KafkaOffsets:
    """The positions of a spout task's partitions and, at least once, its records in flight."""

    def __init__(self, retry: RetryPolicy, max_uncommitted: int,
                 on_give_up: Callable[[TP, int, int, Any], None] | None = None) -> None:
        self.retry = retry
        self.max_uncommitted = max_uncommitted
        # (partition, offset, failures, record), once a record's retries are spent
        self.on_give_up = on_give_up
        self.trackers: dict[TP, Partition] = {}
        self.runs: dict[int, Run] = {}  # run number → run, while one of its records is not done
        self.stats = SourceStats()
        self._next_run = 0
        self._retry_heap: list[tuple[float, int, int]] = []  # (due, seq, message id)
        self._seq = 0

    # --- partitions (the reader's calls) ---------------------------------------------------------
    def assign(self, tp: TP, committed: int) -> None:
        """Starts tracking ``tp`` from ``committed`` (-1: unknown, learned from the first record);
        kept if already tracked."""
        if tp not in self.trackers:
            self.trackers[tp] = Partition(committed, committed)

    def revoke(self, tp: TP) -> None:
        """``tp`` is another task's now: its records in flight are forgotten (a late ack is
        ignored)."""
        part = self.trackers.pop(tp, None)
        if part is not None:
            for run in part.runs:
                self.runs.pop(run.number, None)

    def committed(self, offsets: dict[TP, int]) -> None:
        """The broker confirmed these commits."""
        for tp, off in offsets.items():
            part = self.trackers.get(tp)
            if part is not None and off > part.committed:
                part.committed = off

    # --- untracked -------------------------------------------------------------------------------
    def fetched(self, tp: TP, end: int) -> None:
        """A poll's records of ``tp`` up to ``end`` (exclusive) were handed on untracked."""
        part = self.trackers.get(tp)
        if part is not None and end > part.fetched:
            part.fetched = end

    # --- tracked ---------------------------------------------------------------------------------
    def room(self, tp: TP) -> int:
        """How many new records ``tp`` may emit now (Storm's emit allowance); 0 when not assigned."""
        part = self.trackers.get(tp)
        return 0 if part is None else self.max_uncommitted - part.uncommitted()

    def emitted(self, tp: TP, batch: list[Any]) -> tuple[list[Any], range]:
        """Records a batch of ``tp``'s records (in offset order) as emitted: the fresh ones and
        their message ids. A record below the fetched position is stale (read again after a seek
        back: in flight or done already) and is left out."""
        part = self.trackers.get(tp)
        if part is None or not batch:
            return [], range(0)
        top = part.fetched
        if batch[0].offset() < top:
            batch = [m for m in batch if m.offset() >= top]
            if not batch:
                return [], range(0)
        if part.start < 0:
            part.start = batch[0].offset()
        part.fetched = batch[-1].offset() + 1
        if len(batch) >= WHOLE:
            raise ValueError(f"a run holds fewer than {WHOLE} records, found {len(batch)}")
        number = self._next_run
        self._next_run = number + 1
        run = Run(tp, number, batch)
        self.runs[number] = run
        part.runs.append(run)
        self.stats.emitted += len(batch)
        first = number << ID_BITS
        return batch, range(first, first + len(batch))

    def _open(self, msg_id: int) -> Run | None:
        """The run of a record in flight, or None (done, revoked, or not an id of ours)."""
        run = self.runs.get(msg_id >> ID_BITS)
        index = msg_id & ID_MASK
        if run is None or index >= len(run.done) or run.done[index]:
            return None
        return run

    def _ack_whole(self, msg_id: int) -> bool:
        """Every record of a run done (its ``run_id`` acked); False when the run is gone."""
        run = self.runs.get(msg_id >> ID_BITS)
        if run is None:
            return False
        done = run.done
        open_ = done.count(0)
        done[:] = b"\x01" * len(done)
        self.stats.acked += open_
        return open_ > 0

    def ack(self, msg_id: int) -> bool:
        """True if the record (or, for a ``run_id``, a record of the run) was in flight (a late
        ack of a revoked partition is ignored)."""
        if msg_id & ID_MASK == WHOLE:
            return self._ack_whole(msg_id)
        run = self._open(msg_id)
        if run is None:
            return False
        run.done[msg_id & ID_MASK] = 1
        self.stats.acked += 1
        return True

    def ack_many(self, msg_ids: Sequence[int]) -> None:
        """``ack`` for each id the engine resolved (ids it was given at the emit, in runs of one
        batch: one lookup per run)."""
        runs = self.runs
        number = -1
        done: bytearray | None = None
        n = 0
        for i in msg_ids:
            if i & ID_MASK == WHOLE:
                self._ack_whole(i)
                continue
            if i >> ID_BITS != number:
                number = i >> ID_BITS
                run = runs.get(number)
                done = None if run is None else run.done
            if done is not None:
                done[i & ID_MASK] = 1
                n += 1
        self.stats.acked += n

    def fail(self, msg_id: int, now: float) -> bool:
        """Schedules a retry with backoff; past the retry policy's limit the record is given up
        (``on_give_up``) and done, so commits pass it. Returns whether a retry was scheduled. A
        ``run_id`` fails each record of the run not done yet, each then retried on its own."""
        if msg_id & ID_MASK == WHOLE:
            run = self.runs.get(msg_id >> ID_BITS)
            if run is None:
                return False
            first = msg_id - WHOLE
            retried = [self.fail(first + i, now) for i in range(len(run.done)) if not run.done[i]]
            return any(retried)
        run = self._open(msg_id)
        if run is None:
            return False
        index = msg_id & ID_MASK
        if run.failures is None:
            run.failures = {}
        failures = run.failures[index] = run.failures.get(index, 0) + 1
        self.stats.failed += 1
        if not self.retry.may_retry(failures):
            run.done[index] = 1
            self.stats.given_up += 1
            if self.on_give_up is not None:
                record = run.records[index]
                self.on_give_up(run.tp, record.offset(), failures, record)
            return False
        self._seq += 1
        heapq.heappush(self._retry_heap, (now + self.retry.delay(failures), self._seq, msg_id))
        return True

    def due_retries(self, now: float, limit: int = 1000) -> list[tuple[int, Any]]:
        """(message id, record) of the failed records whose backoff has passed, oldest first."""
        out: list[tuple[int, Any]] = []
        heap = self._retry_heap
        while heap and heap[0][0] <= now and len(out) < limit:
            msg_id = heapq.heappop(heap)[2]
            run = self.runs.get(msg_id >> ID_BITS)
            if run is not None and not run.done[msg_id & ID_MASK]:
                out.append((msg_id, run.records[msg_id & ID_MASK]))
                self.stats.retries += 1
        return out

    def in_flight(self) -> int:
        """Records emitted and not done yet, over every partition."""
        return sum(run.done.count(0) for run in self.runs.values())

    # --- commits ---------------------------------------------------------------------------------
    def commits(self) -> dict[TP, int]:
        """Partition → the offset a commit may write now (only partitions that advanced): the
        first record not done, or one past the last fetched when none is in flight. Runs whose
        records are all done are forgotten here."""
        out: dict[TP, int] = {}
        runs = self.runs
        for tp, part in self.trackers.items():
            queue = part.runs
            nxt = part.fetched
            while queue:
                run = queue[0]
                first = run.first_open()
                if first >= 0:
                    nxt = run.records[first].offset()
                    break
                queue.popleft()
                del runs[run.number]
            if nxt > part.committed:
                out[tp] = nxt
        return out
