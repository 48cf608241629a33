"""The KafkaSpout's delivery modes: what a poll's records become and which offsets a commit
writes, one class per mode, chosen once at ``initialize`` (``delivery_for``):

- ``Tracked``: at least once with the engine's acking. Each record is emitted with a message id
  and kept, in the run of its batch, until acked (``offsets.py``); a retry re-emits the kept
  record. An offset is committed only when it and every earlier one of its partition are acked.
- ``PassThrough``: NO_GUARANTEE and AT_MOST_ONCE (and AT_LEAST_ONCE without acking): a poll's
  batch is emitted as it came and only each partition's consumed position is kept.
- ``Checkpointed``: effectively once. Each partition's position (the next offset to emit) goes
  into the state at every checkpoint; the group's committed offsets follow complete checkpoints
  only (the spout module's docstring).

The partition reader (``reader.py``) calls ``revoked``, ``start``, ``assigned`` and ``confirmed``;
the spout calls ``received`` with each non-empty poll, ``drain`` at each next_tuple and
``commit`` periodically and at close (bound once: no call is added per record)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from heron_py.api.state.state import State
from heron_py.api.stream import Stream
from heron_py.connectors.kafka.config import ProcessingGuarantee as PG
from heron_py.connectors.kafka.offsets import TP, KafkaOffsets, run_id
from heron_py.connectors.kafka.reader import PartitionReader

if TYPE_CHECKING:
    from heron_py.connectors.kafka.spout import KafkaSpout

POSITIONS_KEY = "kafka.positions"  # in the state: {(topic, partition): next offset}


def positions_to_state(positions: dict[TP, int]) -> dict[TP, int]:
    """A mapping, so that a rescale can merge every old task's positions key by key (a
    checkpoint written before holds the list form, which positions_from_state reads too)."""
    return dict(sorted(positions.items()))


def positions_from_state(value: Any) -> dict[TP, int]:
    """The saved positions: the spout's list of [topic, partition, offset], or the
    KafkaSource's live {(topic, partition): offset} dict."""
    if isinstance(value, dict):
        return {(str(t), int(p)): int(o) for (t, p), o in value.items()}
    return {(str(t), int(p)): int(o) for t, p, o in (value or [])}


def newest_complete(saved: dict[int, dict[TP, int]], complete_id: int) -> int | None:
    """The newest checkpoint id among ``saved`` at or below ``complete_id``, or None. Its
    positions are the ones to commit: the complete checkpoint's state covers every record before
    them, so no restore replays what they pass."""
    done = [cid for cid in saved if cid <= complete_id]
    return max(done) if done else None


def runs(msgs: list[Any], on_error: Callable[[Any], None]) -> Iterator[tuple[TP, list[Any]]]:
    """A poll's records in runs of one partition, in order, each with its ``(topic, partition)``
    (a fetch answers per partition, so a poll is a few runs: the key is built per run, not per
    record; a partition may come back in a later run). A record that is an error goes to
    ``on_error`` and ends no run."""
    run: list[Any] = []
    run_p, run_t = -1, ""
    for m in msgs:
        err = m.error()
        if err is not None:
            on_error(err)
            continue
        p = m.partition()
        if p != run_p or m.topic() != run_t:
            if run:
                yield (run_t, run_p), run
            run, run_p, run_t = [], p, m.topic()
        run.append(m)
    if run:
        yield (run_t, run_p), run


class Delivery:
    """What the modes share: the per-record emit (when the batch emits are not bound), the
    buffering of a poll by partition, and the reader's hooks (nothing to do by default)."""

    def __init__(self, spout: KafkaSpout, reader: PartitionReader, source: KafkaOffsets) -> None:
        self.spout, self.reader, self.source = spout, reader, source
        self.buffers = reader.buffers
        self.records = 0  # records emitted since the last metrics snapshot
        # built at the first emit: the host binds its fast emit after initialize returns
        self._emit_record: Callable[[Any, Any], None] | None = None

    def received(self, msgs: list[Any]) -> None:
        """A poll's records, kept per partition for ``drain``."""
        buffers = self.buffers
        for tp, run in runs(msgs, self.reader.on_error):
            buf = buffers.get(tp)
            if buf is None:
                buf = buffers[tp] = deque()
            buf.extend(run)

    def drain(self, now: float) -> None:
        """Emits what is due (next_tuple, after the poll)."""

    def commit(self, sync: bool = False) -> None:
        offsets = self.source.commits()
        if offsets:
            self.reader.commit_offsets(offsets, sync)

    def revoked(self, tp: TP) -> None:
        """``tp`` is another task's now."""

    def start(self, tp: TP, off: int | str) -> int | str:
        """Where a newly assigned partition starts (``off``: the first-poll strategy's answer)."""
        return off

    def assigned(self) -> None:
        """The reader's new assignment is in place."""

    def confirmed(self, done: dict[TP, int]) -> None:
        """The broker confirmed these committed offsets."""

    def record_emitter(self) -> Callable[[Any, Any], None]:
        """The per-record step (when the batch emits are not bound: a hook or a tap sees each
        emit): the built-in translators' row, else the user's translator, which picks the stream
        or skips a record (a skipped tracked record is acked, so commits pass it)."""
        spout = self.spout
        row, emit = spout._row, spout.emit
        fn: Callable[[Any, Any], None]
        if row is None:
            translate, key_de, value_de, ack = spout.translator.translate, spout.key_de, spout.value_de, self.source.ack

            def fn(m: Any, msg_id: Any) -> None:
                topic = m.topic()
                out = translate(topic, m.partition(), m.offset(), key_de(topic, m.key()), value_de(topic, m.value()))
                if out is None:
                    if msg_id is not None:
                        ack(msg_id)
                    return
                stream, values = out
                emit(values, tup_id=msg_id, stream=stream)
        else:
            def fn(m: Any, msg_id: Any) -> None:
                emit(row(m), tup_id=msg_id)
        self._emit_record = fn
        return fn


class Tracked(Delivery):
    """At least once, tracked: each batch a run of message ids (``offsets.py``), emitted as one
    tuple tree under the run's own id (``run_id``) or, with ``kafka.ack.per.record``, a tree per
    record, within Storm's emit allowance (``max_uncommitted``) per partition."""

    def drain(self, now: float) -> None:
        source = self.source
        emit = self._emit_record or self.record_emitter()
        for retry_id, rec in source.due_retries(now):
            emit(rec, retry_id)
        spout = self.spout
        rows = spout._batch_rows
        emit_many = spout.heron_emit_tracked_many
        # a batch as one tuple tree under its run's id, unless kafka.ack.per.record asks for a tree per record
        emit_run = None if spout.cfg.ack_per_record else spout.heron_emit_tracked_run
        room_of, emitted = source.room, source.emitted
        n = 0
        for tp, buf in self.buffers.items():
            if not buf:
                continue
            # the allowance, computed once per batch: only the emits below spend it
            room = room_of(tp)
            while buf and room > 0:
                # the whole allowance at once (a poll's records, usually); a stale record spends
                # none, so the loop takes more while room is left
                if len(buf) <= room:
                    batch = list(buf)
                    buf.clear()
                else:
                    batch = [buf.popleft() for _ in range(room)]
                fresh, ids = emitted(tp, batch)
                if fresh:
                    if rows is not None and emit_run is not None:
                        emit_run(rows(tp, fresh), run_id(ids))
                    elif rows is not None and emit_many is not None:
                        emit_many(rows(tp, fresh), ids)
                    else:
                        for m, msg_id in zip(fresh, ids, strict=True):
                            emit(m, msg_id)
                    n += len(fresh)
                room = room_of(tp)
        self.records += n


class PassThrough(Delivery):
    """NO_GUARANTEE and AT_MOST_ONCE: no per-record tracking, nothing buffered."""

    def __init__(self, spout: KafkaSpout, reader: PartitionReader, source: KafkaOffsets) -> None:
        super().__init__(spout, reader, source)
        self.at_most_once = spout.cfg.guarantee is PG.AT_MOST_ONCE

    def received(self, msgs: list[Any]) -> None:
        """AT_MOST_ONCE commits the batch's end per partition (synchronously) before emitting
        any of it; when that commit fails the consumer is sought back to the batch's start, so
        the records are read again rather than emitted uncommitted (a crash then would emit them
        twice). NO_GUARANTEE only moves each partition's consumed position, which the periodic
        commit writes."""
        good: list[tuple[TP, list[Any]]] = []
        first: dict[TP, int] = {}
        last: dict[TP, int] = {}
        for tp, run in runs(msgs, self.reader.on_error):
            good.append((tp, run))
            first.setdefault(tp, run[0].offset())
            last[tp] = run[-1].offset() + 1
        if not good:
            return
        if self.at_most_once and not self.reader.commit_offsets(last, sync=True):
            self.reader.seek(first)
            return
        fetched = self.source.fetched
        for tp, end in last.items():
            fetched(tp, end)  # with nothing in flight, the position a commit writes
        spout = self.spout
        rows = spout._batch_rows
        n = 0
        if rows is not None and spout.heron_emit_many is not None:
            out: list[list[Any]] = []
            for tp, run in good:
                out += rows(tp, run)
            n = len(out)
            spout.heron_emit_many(out, Stream.DEFAULT_STREAM_ID)
        else:
            emit = self._emit_record or self.record_emitter()
            for _, run in good:
                for m in run:
                    emit(m, None)
                n += len(run)
        self.records += n

    def commit(self, sync: bool = False) -> None:
        if not self.at_most_once:  # AT_MOST_ONCE committed each batch before emitting it
            super().commit(sync)


class Checkpointed(Delivery):
    """Effectively once: positions in checkpoints, commits after complete ones."""

    def __init__(self, spout: KafkaSpout, reader: PartitionReader, source: KafkaOffsets,
                 restored: dict[TP, int] | None) -> None:
        super().__init__(spout, reader, source)
        # next offset to emit per partition; what a checkpoint saves and a restore seeks to
        self.positions: dict[TP, int] = {}
        self.saved: dict[int, dict[TP, int]] = {}  # checkpoint id → positions saved, not known complete
        # the positions of the newest complete checkpoint (or the restored one) the broker has not
        # confirmed yet: a failed commit stays here and is retried
        self.due: dict[TP, int] = {}
        self.restored = restored  # the positions init_state restored (None: not restored)
        self._restored_now: dict[TP, int] = {}  # of those, the ones the current assignment starts at

    def drain(self, now: float) -> None:
        spout = self.spout
        emit = self._emit_record or self.record_emitter()
        rows = spout._batch_rows
        for tp, buf in self.buffers.items():
            if not buf:
                continue
            n = len(buf)
            m = buf[-1]
            if rows is not None and spout.heron_emit_many is not None:
                spout.heron_emit_many(rows(tp, buf), Stream.DEFAULT_STREAM_ID)
                buf.clear()
            else:
                while buf:
                    emit(buf.popleft(), None)
            self.positions[tp] = m.offset() + 1
            self.records += n

    def save(self, state: State, checkpoint_id: str) -> None:
        """``pre_save``: the positions into the state."""
        state.put(POSITIONS_KEY, positions_to_state(self.positions))
        # kept until the master says this checkpoint (or a newer one) is complete: committed
        # earlier, the offsets could pass records a rollback to an older checkpoint replays
        self.saved[int(checkpoint_id)] = dict(self.positions)

    def complete(self, checkpoint_id: int) -> None:
        """``on_checkpoint_complete``: the positions saved for the newest checkpoint at or below
        it become the ones to commit, and every saved checkpoint up to it is forgotten."""
        cid = newest_complete(self.saved, checkpoint_id)
        if cid is not None:
            # replaces what an older checkpoint left unconfirmed: these positions are newer
            self.due = dict(self.saved[cid])
        self.saved = {k: v for k, v in self.saved.items() if k > checkpoint_id}
        self.commit()

    def commit(self, sync: bool = False) -> None:
        # the complete positions not confirmed yet (after a word or a restore, and as a retry
        # at the periodic point), of the partitions this task holds: a revoked partition is
        # another task's to commit. Asynchronous even at close: a restore closes the
        # component, the broker may be what failed, and the new component commits the
        # restored positions itself
        assigned = self.reader.assigned
        due = {tp: off for tp, off in self.due.items() if tp in assigned}
        if due:
            self.reader.commit_offsets(due, sync=False)

    def revoked(self, tp: TP) -> None:
        self.positions.pop(tp, None)
        self.due.pop(tp, None)

    def start(self, tp: TP, off: int | str) -> int | str:
        if self.restored and tp in self.restored:
            off = self._restored_now[tp] = self.restored[tp]  # the restored checkpoint's position wins
        if isinstance(off, int):
            self.positions[tp] = off
        return off

    def assigned(self) -> None:
        restored, self._restored_now = self._restored_now, {}
        if restored:
            # a restore target is complete, and the master's word for it may never come (lost, or
            # sent before this task restarted): its positions are committed here
            self.due.update(restored)
            self.commit()

    def confirmed(self, done: dict[TP, int]) -> None:
        # confirmed: no retry; a newer position due meanwhile stays due
        for tp, off in done.items():
            if self.due.get(tp) == off:
                del self.due[tp]


def delivery_for(spout: KafkaSpout, reader: PartitionReader, source: KafkaOffsets, checkpointed: bool,
                 tracked: bool) -> Delivery:
    if checkpointed:
        return Checkpointed(spout, reader, source, spout._restored)
    return Tracked(spout, reader, source) if tracked else PassThrough(spout, reader, source)
