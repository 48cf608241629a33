"""The pure cores of connectors: what a replayable source and an acked sink must track, with
no I/O and an injected clock, so Kafka (and later Redis, RabbitMQ, PostgreSQL, files) share
one tested implementation of the delivery rules.

Source side (storm-kafka-client's semantics):
- ``OffsetTracker`` is Storm's OffsetManager for one partition: offsets emitted and acked; the
  commit point advances only over a contiguous run of acked offsets from the last commit, so a
  commit never runs ahead of an ack (a record below the commit point is never lost by a crash).
- ``RetryPolicy`` is an exponential backoff with a cap and a maximum number of retries.
- ``ReplayableSource`` ties them together per partition: pending records, failed records due
  for a retry, records given up (committed past, as Storm does), the emit allowance
  (``max_uncommitted``), and positions a stateful component can checkpoint and restore.

Sink side: ``AckedSink`` batches inputs up to a size or a delay; an input is acked only when
the write of its batch was confirmed, and failed when the write failed.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Generic, TypeVar

P = TypeVar("P", bound=Hashable)  # a partition (Kafka: (topic, partition))
T = TypeVar("T")  # an input item of a sink


class ConnectorConfigError(ValueError):
    """A connector option with a bad value: one line saying what, where, expected, found."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: the n-th retry (n from 1) waits ``initial_s * multiplier**(n-1)``,
    capped at ``max_delay_s``; ``max_retries`` < 0 retries forever (Storm's default)."""

    initial_s: float = 0.0
    multiplier: float = 2.0
    max_delay_s: float = 10.0
    max_retries: int = -1

    def delay(self, attempt: int) -> float:
        if attempt <= 1:
            return min(self.initial_s, self.max_delay_s)
        return min(self.initial_s * self.multiplier ** (attempt - 1), self.max_delay_s)

    def may_retry(self, failures: int) -> bool:
        """After ``failures`` failures of one record, whether it is retried again."""
        return self.max_retries < 0 or failures <= self.max_retries


class OffsetTracker:
    """One partition's emitted and acked offsets (Storm's OffsetManager).

    ``committed`` is the next offset to consume after a restart (Kafka's committed offset
    semantics: the offset of the first unprocessed record). ``next_commit`` is the offset a
    commit may write now: the end of the contiguous run of done offsets from ``committed``."""

    def __init__(self, committed: int) -> None:
        self.committed = committed
        self.acked: set[int] = set()
        self.emitted: set[int] = set()  # emitted and not yet acked
        self.fetched = committed  # one past the highest offset fetched

    def add_emitted(self, offset: int) -> None:
        self.emitted.add(offset)
        self.fetched = max(self.fetched, offset + 1)

    def add_acked(self, offset: int) -> None:
        """An acked offset, or one given up after its retries (committed past, as Storm)."""
        self.emitted.discard(offset)
        if offset >= self.committed:
            self.acked.add(offset)

    def next_commit(self) -> int | None:
        """The offset a commit may write, or None when nothing new can be committed: the
        lowest offset still in flight, or one past the highest fetched. Records are fetched in
        order, so an offset below ``fetched`` that is not in flight was acked (or given up) or
        is a gap the broker left (compaction, transaction markers): either way done."""
        nxt = min(self.emitted) if self.emitted else self.fetched
        return nxt if nxt > self.committed else None

    def commit(self, offset: int) -> None:
        if offset <= self.committed:
            return
        self.committed = offset
        self.acked = {a for a in self.acked if a >= offset}

    def uncommitted(self) -> int:
        """Offsets emitted past the commit point (pending and acked alike), as Storm counts them."""
        return len(self.emitted) + len(self.acked)


_NO_PARTITION: Any = object()  # equal to no partition


# A record in flight: (partition, offset, record, failures). A tuple, not a class: one is made per
# record emitted, and a dataclass's generated __init__ (Python code) was half of a Redis entry's
# bookkeeping (bench/RESULTS.md); a retry replaces it with the failures counted.
_PART: Final = 0
_OFFSET: Final = 1
_RECORD: Final = 2
Pending = tuple[P, int, Any, int]


@dataclass
class SourceStats:
    """Counters a connector exports as metrics (taken and reset by ``take``)."""

    emitted: int = 0
    acked: int = 0
    failed: int = 0
    retries: int = 0
    given_up: int = 0

    def take(self) -> dict[str, int]:
        out = dict(self.__dict__)
        for k in out:
            setattr(self, k, 0)
        return out


@dataclass
class ReplayableSource(Generic[P]):
    """Per-partition offset tracking, retries and commits for an at-least-once source.

    The caller polls its system, calls ``may_emit(p)`` before emitting a new record and
    ``emitted`` after; ``ack``/``fail`` take the message id ``(partition, offset)``;
    ``due_retries(now)`` yields the records to emit again; ``commits()`` the offsets to commit,
    and ``committed(...)`` once the system confirmed them."""

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_uncommitted: int = 10_000_000
    # a bound on records in flight (emitted, neither acked nor given up) per partition, for a
    # source whose option says "in flight" (redis.max.pending, files.max.pending): an ack frees
    # room at once. max_uncommitted (Storm's max.uncommitted.offsets) counts acked records too
    # until ``committed``, so under it a source committing once a second emits at most that
    # many records a second (the Redis spout was held to 100,000 entries/s so)
    max_in_flight: int | None = None
    # (partition, offset, failures, record): called once the record is forgotten, so it gets the
    # record itself (a source acknowledges or rejects it in its system by what the record holds)
    on_give_up: Callable[[P, int, int, Any], None] | None = None
    trackers: dict[P, OffsetTracker] = field(default_factory=dict)
    pending: dict[tuple[P, int], Pending[P]] = field(default_factory=dict)
    # False for a system that keeps each record's state itself and needs no offset committed
    # (Redis's pending entries lists, XACKed per entry): no offsets are kept, ``commits`` is
    # empty, and max_in_flight counts ``in_flight``; positions then mean nothing
    offsets: bool = True
    # records in flight per partition, kept when ``offsets`` is False
    in_flight: dict[P, int] = field(default_factory=dict)
    stats: SourceStats = field(default_factory=SourceStats)
    _retry_heap: list[tuple[float, int, tuple[P, int]]] = field(default_factory=list)
    _seq: int = 0

    def assign(self, partition: P, committed: int) -> None:
        """Starts tracking ``partition`` from ``committed`` (kept if already tracked)."""
        if partition not in self.trackers:
            self.trackers[partition] = OffsetTracker(committed)

    def revoke(self, partition: P) -> None:
        self.trackers.pop(partition, None)
        self.in_flight.pop(partition, None)
        for key in [k for k in self.pending if k[0] == partition]:
            del self.pending[key]

    def may_emit(self, partition: P) -> bool:
        """Storm's rule: a partition stops emitting new records once ``max_uncommitted``
        offsets past its commit point are outstanding (retries still go out), or, with
        ``max_in_flight``, once that many records are in flight."""
        t = self.trackers.get(partition)
        if t is None:
            return False
        if not self.offsets:
            return self.max_in_flight is None or self.in_flight.get(partition, 0) < self.max_in_flight
        if self.max_in_flight is not None and len(t.emitted) >= self.max_in_flight:
            return False
        return t.uncommitted() < self.max_uncommitted

    def emitted(self, partition: P, offset: int, record: Any) -> tuple[P, int] | None:
        """Records an emit; returns the message id, or None if the record is stale (below the
        commit point or already in flight: a re-fetch after a seek)."""
        ids = self.emitted_many(partition, ((offset, record),))
        return ids[0]

    def emitted_many(self, partition: P, records: Sequence[tuple[int, Any]]) -> list[tuple[P, int] | None]:
        """``emitted`` for a batch of one partition's ``(offset, record)`` pairs, with the
        tracker lookup, the high-water mark and the stats done once per batch instead of once
        per record (a Kafka poll hands over hundreds of records of a partition at once). The
        ids are in the records' order; None marks a stale record, as ``emitted`` does."""
        t = self.trackers.get(partition)
        if t is None:
            return [None] * len(records)
        pending = self.pending
        ids: list[tuple[P, int] | None] = []
        append = ids.append
        n = 0
        if not self.offsets:
            for offset, record in records:
                key = (partition, offset)
                if key in pending:
                    append(None)
                    continue
                pending[key] = (partition, offset, record, 0)
                append(key)
                n += 1
            self.in_flight[partition] = self.in_flight.get(partition, 0) + n
            self.stats.emitted += n
            return ids
        committed, acked, in_flight = t.committed, t.acked, t.emitted
        top = t.fetched
        for offset, record in records:
            key = (partition, offset)
            if offset < committed or key in pending or offset in acked:
                append(None)
                continue
            in_flight.add(offset)
            if offset >= top:
                top = offset + 1
            pending[key] = (partition, offset, record, 0)
            append(key)
            n += 1
        t.fetched = top
        self.stats.emitted += n
        return ids

    def _done(self, partition: P, offset: int) -> None:
        """A record that left ``pending`` (acked or given up): counted as done for commits."""
        if self.offsets:
            t = self.trackers.get(partition)
            if t is not None:
                t.add_acked(offset)
        elif partition in self.in_flight:
            self.in_flight[partition] -= 1

    def ack(self, msg_id: tuple[P, int]) -> bool:
        """True if the id was pending (a late ack of a revoked partition is ignored)."""
        p = self.pending.pop(msg_id, None)
        if p is None:
            return False
        self._done(p[_PART], p[_OFFSET])
        self.stats.acked += 1
        return True

    def ack_many(self, msg_ids: Sequence[tuple[P, int]]) -> list[Any]:
        """``ack`` for each id, in one pass; the records of those that were pending, in order
        (a spout acknowledges them in its system)."""
        pending, trackers = self.pending, self.trackers
        out: list[Any] = []
        append = out.append
        if not self.offsets:
            in_flight = self.in_flight
            for key in msg_ids:
                p = pending.pop(key, None)
                if p is not None:
                    append(p[_RECORD])
                    in_flight[p[_PART]] -= 1
            self.stats.acked += len(out)
            return out
        tracker: OffsetTracker | None = None
        partition: Any = _NO_PARTITION
        for key in msg_ids:
            p = pending.pop(key, None)
            if p is None:
                continue
            if p[_PART] != partition:  # ids come in runs of one partition: one lookup per run
                partition = p[_PART]
                tracker = trackers[partition]
            assert tracker is not None
            off = p[_OFFSET]
            # tracker.add_acked(off), inlined
            tracker.emitted.discard(off)
            if off >= tracker.committed:
                tracker.acked.add(off)
            append(p[_RECORD])
        self.stats.acked += len(out)
        return out

    def fail(self, msg_id: tuple[P, int], now: float) -> bool:
        """Schedules a retry with backoff; past ``max_retries`` the record is given up
        (``on_give_up(partition, offset, failures, record)``) and counted as done so commits pass it.
        Returns whether a retry was scheduled."""
        p = self.pending.get(msg_id)
        if p is None:
            return False
        partition, offset, record, failures = p
        failures += 1
        self.stats.failed += 1
        if not self.retry.may_retry(failures):
            del self.pending[msg_id]
            self._done(partition, offset)
            self.stats.given_up += 1
            if self.on_give_up is not None:
                self.on_give_up(partition, offset, failures, record)
            return False
        self.pending[msg_id] = (partition, offset, record, failures)
        self._seq += 1
        heapq.heappush(self._retry_heap, (now + self.retry.delay(failures), self._seq, msg_id))
        return True

    def due_retries(self, now: float, limit: int = 1000) -> list[tuple[tuple[P, int], Any]]:
        """(message id, record) of the failed records whose backoff has passed, oldest first."""
        out: list[tuple[tuple[P, int], Any]] = []
        while self._retry_heap and self._retry_heap[0][0] <= now and len(out) < limit:
            _, _, key = heapq.heappop(self._retry_heap)
            p = self.pending.get(key)
            if p is not None:
                out.append((key, p[_RECORD]))
                self.stats.retries += 1
        return out

    def commits(self) -> dict[P, int]:
        """Partition → offset that may be committed now (only partitions that advanced)."""
        out: dict[P, int] = {}
        if not self.offsets:
            return out
        for part, t in self.trackers.items():
            nxt = t.next_commit()
            if nxt is not None:
                out[part] = nxt
        return out

    def committed(self, offsets: dict[P, int]) -> None:
        """The system confirmed these commits."""
        for part, off in offsets.items():
            t = self.trackers.get(part)
            if t is not None:
                t.commit(off)

    def positions(self) -> dict[P, int]:
        """For a checkpoint: each partition's commit point after applying what is committable
        (what a restore seeks to)."""
        return {part: (t.next_commit() or t.committed) for part, t in self.trackers.items()}

    def restore(self, positions: dict[P, int]) -> None:
        """Forget everything in flight and restart each partition at its position."""
        self.pending.clear()
        self.in_flight.clear()
        self._retry_heap.clear()
        self.trackers = {part: OffsetTracker(off) for part, off in positions.items()}


@dataclass(frozen=True)
class BatchPolicy:
    """A sink writes a batch when it holds ``max_size`` items or its oldest item is
    ``max_delay_s`` old."""

    max_size: int = 1
    max_delay_s: float = 0.0


@dataclass
class AckedSink(Generic[T]):
    """Batches inputs and maps write outcomes to acks and fails. ``add`` returns a batch to
    write when one is full; ``due(now)`` when the oldest item waited long enough; the caller
    hands each batch to its system with ``started(batch)`` → batch id, then calls ``confirmed``
    or ``failed`` with that id and acks or fails the returned inputs."""

    policy: BatchPolicy = field(default_factory=BatchPolicy)
    buffer: list[T] = field(default_factory=list)
    first_at: float | None = None
    in_flight: dict[int, list[T]] = field(default_factory=dict)
    _next_id: int = 0

    def add(self, item: T, now: float) -> list[T] | None:
        if not self.buffer:
            self.first_at = now
        self.buffer.append(item)
        return self._take() if len(self.buffer) >= self.policy.max_size else None

    def due(self, now: float) -> list[T] | None:
        if self.buffer and self.first_at is not None and now - self.first_at >= self.policy.max_delay_s:
            return self._take()
        return None

    def _take(self) -> list[T]:
        batch, self.buffer, self.first_at = self.buffer, [], None
        return batch

    def started(self, batch: Iterable[T]) -> int:
        self._next_id += 1
        self.in_flight[self._next_id] = list(batch)
        return self._next_id

    def confirmed(self, batch_id: int) -> list[T]:
        return self.in_flight.pop(batch_id, [])

    def failed(self, batch_id: int) -> list[T]:
        return self.in_flight.pop(batch_id, [])

    def outstanding(self) -> int:
        return len(self.buffer) + sum(len(b) for b in self.in_flight.values())
