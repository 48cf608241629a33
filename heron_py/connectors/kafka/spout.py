"""KafkaSpout: storm-kafka-client's spout for heronpy topologies, on confluent-kafka.

The engine assigns partitions (``round_robin``: partition i of the sorted list goes to the task
of index i mod tasks, Storm's RoundRobinManualPartitioner) and refreshes them every
``kafka.partition.refresh.period.ms``; there is no consumer-group rebalancing between tasks.
At least once, an offset is committed only when it and every earlier one of its partition are
acked (``heron_py.connectors.base``). Records in flight are kept in memory until acked, so a
retry re-emits the kept record instead of seeking the consumer back (bounded by
``topology.max.spout.pending``).

Effectively once (``topology.reliability.mode`` EFFECTIVELY_ONCE) the spout is a stateful
component: each partition's position (the next offset to emit) goes into its state at every
checkpoint (``pre_save``) and is sought after a restore (``init_state`` comes before
``initialize``). The group's committed offsets follow complete checkpoints only, so a monitor
sees lag and nothing past a state that could still be rolled back is committed. The spout does
not read the checkpoint storage (the master's): it learns that checkpoint N is complete from the
master's notification (``on_checkpoint_complete(N)``, as a committing sink does), then commits,
asynchronously, the positions it saved for the newest checkpoint at or below N and forgets those
up to N. A restore
target is complete by definition, so a restore commits the restored positions once their
partitions are assigned (the notification may have been lost, or the task killed before its
commit). Those positions stay due until the broker confirms them: a failed commit is logged
(throttled) and retried at the periodic commit, unless a newer complete checkpoint supersedes
it first.
"""

from __future__ import annotations

import json
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from heron_py.api.metrics import IMetric
from heron_py.api.spout.spout import Spout
from heron_py.api.state.state import State
from heron_py.api.stream import Stream
from heron_py.common.config import MODE
from heron_py.connectors.base import ReplayableSource
from heron_py.connectors.common import LogThrottle, component_where, source_acking
from heron_py.connectors.kafka.config import FirstPollOffsetStrategy as FP
from heron_py.connectors.kafka.config import ProcessingGuarantee as PG
from heron_py.connectors.kafka.config import SpoutConfig, spout_config
from heron_py.connectors.kafka.translators import (
    JAVA_DESERIALIZERS,
    RecordTranslator,
    ValueRecordTranslator,
    deserializer,
    translator,
)

TP = tuple[str, int]


def round_robin(partitions: Sequence[TP], index: int, tasks: int) -> list[TP]:
    """This task's share of ``partitions``: the sorted list dealt round-robin over the tasks."""
    return [tp for i, tp in enumerate(sorted(partitions)) if i % tasks == index]


def start_offset(strategy: FP, committed: int | None, ours: bool) -> int | str:
    """Where a newly assigned partition starts: an offset, or "earliest"/"latest".
    ``committed`` is the group's committed offset (None when there is none); ``ours`` whether
    this topology committed it (EARLIEST and LATEST ignore commits of an earlier deployment)."""
    if committed is not None and (ours or strategy in (FP.UNCOMMITTED_EARLIEST, FP.UNCOMMITTED_LATEST)):
        return committed
    return "earliest" if strategy in (FP.EARLIEST, FP.UNCOMMITTED_EARLIEST) else "latest"


class _KafkaMetrics(IMetric):
    def __init__(self, spout: KafkaSpout) -> None:
        self.spout = spout

    def get_value_and_reset(self) -> dict[str, float]:
        return self.spout.metrics_snapshot()


POSITIONS_KEY = "kafka.positions"  # in the state: [[topic, partition, next offset], ...]


def positions_to_state(positions: dict[TP, int]) -> list[list[Any]]:
    return [[t, p, o] for (t, p), o in sorted(positions.items())]


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


def record_values(translator: Any, key_de: Any, value_de: Any, strings: bool) -> Callable[[Any], list[Any]] | None:
    """A record's values on the default stream for the built-in translators (what most
    topologies use: no translate() call, no (stream, values) result; ``strings``: both
    deserializers are the string one, decoded inline); None for a user's translator, which
    picks the stream or skips a record."""
    if type(translator) is RecordTranslator and strings:
        def values(m: Any) -> list[Any]:
            k, v = m.key(), m.value()
            return [m.topic(), m.partition(), m.offset(), None if k is None else k.decode("utf-8", "replace"),
                    None if v is None else v.decode("utf-8", "replace")]
    elif type(translator) is RecordTranslator:
        def values(m: Any) -> list[Any]:
            t = m.topic()
            return [t, m.partition(), m.offset(), key_de(t, m.key()), value_de(t, m.value())]
    elif type(translator) is ValueRecordTranslator and strings:
        def values(m: Any) -> list[Any]:
            v = m.value()
            return [None if v is None else v.decode("utf-8", "replace")]
    elif type(translator) is ValueRecordTranslator:
        def values(m: Any) -> list[Any]:
            return [value_de(m.topic(), m.value())]
    else:
        return None
    return values


class KafkaSpout(Spout):
    """Configured by the component's config (``kafka.*``, see docs/connectors/kafka.md)."""

    # effectively once: the positions init_state restored (None: not restored, or another mode)
    _restored: dict[TP, int] | None = None
    _state: State | None = None

    outputs = ["topic", "partition", "offset", "key", "value"]
    clock: Callable[[], float] = time.monotonic
    # the last next_tuple waited in the consumer's poll (read by the engine's spout loop, which
    # then adds no idle wait of its own: SpoutHost.waited_for_input)
    heron_waited = False
    _last_poll_empty = False
    # bound by the engine's host when nothing needs to see each emit (no hook, no tap): a poll's
    # tuples in one call, untracked (heron_emit_many) or with their message ids (runtime/host.py)
    heron_emit_many: Callable[[list[Any], str], None] | None = None
    heron_emit_tracked_many: Callable[[list[Any], list[Any]], None] | None = None

    @classmethod
    def spec(cls, name: str | None = None, par: int = 1, config: dict[str, Any] | None = None,
             optional_outputs: list[Any] | None = None) -> Any:
        """The outputs follow the record translator (named in the config)."""
        from heron_py.api.component.component_spec import HeronComponentSpec

        conf = dict(config or {})
        where = f"kafka spout '{name}'"
        cfg = spout_config(conf, where, "heron-py")
        streams = translator(where, cfg.translator, cfg.topics).streams()
        outputs: list[Any] = [Stream(list(f), name=s) for s, f in streams.items() if s != "default"]
        if "default" in streams:
            outputs.insert(0, Stream(list(streams["default"])))
        return HeronComponentSpec(name, cls, True, par, inputs=None, outputs=outputs + list(optional_outputs or []),
                                  config=conf)

    # --- lifecycle -----------------------------------------------------------------------------
    def initialize(self, config: dict[str, Any], context: Any) -> None:
        from confluent_kafka import Consumer

        self.context = context
        comp = context.get_component_id()
        self.where = component_where("kafka spout", context)
        self.topology = context.get_topology_name()
        self.cfg: SpoutConfig = spout_config(config, self.where, f"heron-py-{self.topology}-{comp}")
        self.translator = translator(self.where, self.cfg.translator, self.cfg.topics)
        self.key_de = deserializer(self.where, "kafka.key.deserializer", self.cfg.key_deserializer)
        self.value_de = deserializer(self.where, "kafka.value.deserializer", self.cfg.value_deserializer)
        strings = (JAVA_DESERIALIZERS.get(self.cfg.key_deserializer, self.cfg.key_deserializer) == "string" and
                   JAVA_DESERIALIZERS.get(self.cfg.value_deserializer, self.cfg.value_deserializer) == "string")
        self._row = record_values(self.translator, self.key_de, self.value_de, strings)
        # the batch emits only when the class keeps the API's emit (an override sees each emit)
        self._batch_row = self._row if type(self).emit is Spout.emit else None
        tasks = sorted(context.get_component_tasks(comp) or [context.get_task_id()])
        self.index, self.tasks = tasks.index(context.get_task_id()), len(tasks)
        # tracking needs the engine's acking: without it ids are never acked and commits would stall
        mode = MODE.parse(config)  # the engine's key (submit refused a bad value)
        # effectively once has no acking: positions travel in checkpoints instead
        self.checkpointed = mode == "EFFECTIVELY_ONCE"
        self.tracked = self.cfg.guarantee is PG.AT_LEAST_ONCE and source_acking(config)
        if self.checkpointed:
            self._init_checkpointed()
        elif self.cfg.guarantee is PG.AT_LEAST_ONCE and not self.tracked:
            self.log(f"{self.where}: kafka.processing.guarantee AT_LEAST_ONCE needs topology.reliability.mode "
                     f"ATLEAST_ONCE, found {mode}; committing periodically without tracking (NO_GUARANTEE)", "warn")
        self.source: ReplayableSource[TP] = ReplayableSource(
            retry=self.cfg.retry, max_uncommitted=self.cfg.max_uncommitted, on_give_up=self._gave_up)
        self.assigned: list[TP] = []
        self.buffers: dict[TP, deque[Any]] = {}
        self.active = True
        # the client retries with its own backoff; the same line is logged at most every 10 s
        self.throttle = LogThrottle(self.clock, period_s=10.0)
        self._records = 0
        self._errors = 0  # kafka errors seen (client callbacks, failed commits, record errors)
        # NO_GUARANTEE and AT_MOST_ONCE outside effectively once track no record: a poll batch
        # is emitted as it came and only each partition's consumed position is kept
        self.untracked = not self.checkpointed and not self.tracked
        # built at the first emit: the host binds its fast emit after initialize returns
        self._emit_record: Callable[[Any, Any], None] | None = None
        self.consumer = Consumer({**self.cfg.client_config(), "error_cb": self._on_error,
                                  "on_commit": self._on_commit})
        now = self.clock()
        self._next_refresh = now
        self._next_commit = now + self.cfg.commit_period_s
        context.register_metric("kafka", _KafkaMetrics(self), 10)

    # --- effectively once ----------------------------------------------------------------------
    def init_state(self, stateful_state: State) -> None:
        """Called before ``initialize``: the positions of the restored checkpoint (none at a
        clean start)."""
        self._state = stateful_state
        self._restored = positions_from_state(stateful_state.get(POSITIONS_KEY))

    def pre_save(self, checkpoint_id: str) -> None:
        if not getattr(self, "checkpointed", False) or self._state is None:
            return
        self._state.put(POSITIONS_KEY, positions_to_state(self.positions))
        # kept until the master says this checkpoint (or a newer one) is complete: committed
        # earlier, the offsets could pass records a rollback to an older checkpoint replays
        self._saved[int(checkpoint_id)] = dict(self.positions)

    def _init_checkpointed(self) -> None:
        if self.cfg.guarantee is not PG.AT_LEAST_ONCE:
            self.log(f"{self.where}: kafka.processing.guarantee {self.cfg.guarantee.value} is ignored in "
                     f"EFFECTIVELY_ONCE mode: positions are checkpointed", "warn")
        # next offset to emit per partition; what a checkpoint saves and a restore seeks to
        self.positions: dict[TP, int] = {}
        self._saved: dict[int, dict[TP, int]] = {}  # checkpoint id → positions saved, not known complete
        # the positions of the newest complete checkpoint (or the restored one) the broker has not
        # confirmed yet: a failed commit stays here and is retried
        self._complete: dict[TP, int] = {}
        if self._restored:
            self.log(f"{self.where}: restored positions " +
                     ", ".join(f"{t}-{p}@{o}" for (t, p), o in sorted(self._restored.items())))

    def on_checkpoint_complete(self, checkpoint_id: int) -> None:
        """The master's word that ``checkpoint_id`` is complete (``StatefulTask.checkpoint_committed``):
        the positions saved for the newest checkpoint at or below it become the ones to commit,
        and every saved checkpoint up to it is forgotten (a newer complete one supersedes it)."""
        if not getattr(self, "checkpointed", False):
            return
        cid = newest_complete(self._saved, checkpoint_id)
        if cid is not None:
            # replaces what an older checkpoint left unconfirmed: these positions are newer
            self._complete = dict(self._saved[cid])
        self._saved = {k: v for k, v in self._saved.items() if k > checkpoint_id}
        self._commit()

    def activate(self) -> None:
        self.active = True
        if self.assigned:
            self.consumer.resume(self._tps(self.assigned))

    def deactivate(self) -> None:
        # a deactivated spout stops polling (Storm pauses the consumer); in-flight acks still count
        self.active = False
        if self.assigned:
            self.consumer.pause(self._tps(self.assigned))

    def close(self) -> None:
        try:
            self._commit(sync=True)
        finally:
            self.consumer.close()

    # --- the loop ------------------------------------------------------------------------------
    def next_tuple(self) -> None:
        self.heron_waited = False
        now = self.clock()
        if now >= self._next_refresh:
            self._refresh()
            self._next_refresh = now + self.cfg.refresh_period_s
        if now >= self._next_commit:
            self._commit()
            self._next_commit = now + self.cfg.commit_period_s
        if not self.active:
            time.sleep(0.01)
            return
        for msg_id, rec in self.source.due_retries(now):
            self._emit(rec, msg_id)
        if not any(self.buffers.values()):
            self._poll()
        self._drain()

    def ack(self, tup_id: Any) -> None:
        self.source.ack(self._key(tup_id))

    def heron_ack_many(self, tup_ids: list[Any]) -> None:
        """``ack`` for a result frame's acked ids at once (the engine calls it instead of ``ack``
        per id when no hook must see each ack); the ids as emitted: ((topic, partition), offset)."""
        self.source.ack_many(tup_ids)

    def fail(self, tup_id: Any) -> None:
        self.source.fail(self._key(tup_id), self.clock())

    @staticmethod
    def _key(tup_id: Any) -> tuple[TP, int]:
        (topic, part), off = tup_id
        return (topic, part), off

    # --- polling and emitting ------------------------------------------------------------------
    def _poll(self) -> None:
        if not self.assigned:
            return
        cfg, consumer = self.cfg, self.consumer
        if self._last_poll_empty and cfg.poll_timeout_s > 0:
            # librdkafka's consume(n, timeout) returns when n records came or the timeout ran
            # out, so a 500-record poll at a few thousand records/s always waited the whole
            # timeout. Wait for the first record only, then take what else is ready. Only
            # after a look that found nothing: the engine flushed this spout's emits before it
            # called again, so nothing emitted waits here with it.
            msgs: list[Any] = consumer.consume(1, cfg.poll_timeout_s)
            self.heron_waited = True
            if msgs and cfg.max_poll_records > 1:
                msgs += consumer.consume(cfg.max_poll_records - 1, 0)
        else:
            msgs = consumer.consume(cfg.max_poll_records, 0)
        self._last_poll_empty = not msgs
        if not msgs:
            return
        if self.untracked:
            self._pass_through(msgs)
            return
        buffers = self.buffers
        for m in msgs:
            err = m.error()
            if err is not None:
                self._on_error(err)
                continue
            tp = (m.topic(), m.partition())
            buf = buffers.get(tp)
            if buf is None:
                buf = buffers[tp] = deque()
            buf.append(m)

    def _pass_through(self, msgs: list[Any]) -> None:
        """NO_GUARANTEE and AT_MOST_ONCE: no per-record tracking. AT_MOST_ONCE commits the
        batch's end per partition (synchronously) before emitting any of it; when that commit
        fails the consumer is sought back to the batch's start, so the records are read again
        rather than emitted uncommitted (a crash then would emit them twice). NO_GUARANTEE
        only moves each partition's consumed position, which the periodic commit writes."""
        good: list[Any] = []
        first: dict[TP, int] = {}
        last: dict[TP, int] = {}
        for m in msgs:
            err = m.error()
            if err is not None:
                self._on_error(err)
                continue
            good.append(m)
            tp = (m.topic(), m.partition())
            off = m.offset()
            first.setdefault(tp, off)
            last[tp] = off + 1
        if not good:
            return
        if self.cfg.guarantee is PG.AT_MOST_ONCE and not self._commit_offsets(last, sync=True):
            self._seek(first)
            return
        trackers = self.source.trackers
        for tp, end in last.items():
            t = trackers.get(tp)
            if t is not None and end > t.fetched:
                t.fetched = end  # with nothing in flight, next_commit() is this position
        row = self._batch_row
        if row is not None and self.heron_emit_many is not None:
            self.heron_emit_many(list(map(row, good)), Stream.DEFAULT_STREAM_ID)
        else:
            emit = self._emit_record or self._make_record_emitter()
            for m in good:
                emit(m, None)
        self._records += len(good)

    def _seek(self, offsets: dict[TP, int]) -> None:
        from confluent_kafka import TopicPartition

        for (t, p), off in offsets.items():
            try:
                self.consumer.seek(TopicPartition(t, p, off))
            except Exception as e:  # the partition was revoked meanwhile: nothing to re-read
                self._on_error(e)

    def _drain(self) -> None:
        emit = self._emit_record or self._make_record_emitter()
        row = self._batch_row
        emit_many = self.heron_emit_tracked_many
        tracked_rows = row if emit_many is not None else None
        for tp, buf in self.buffers.items():
            if not buf:
                continue
            if self.checkpointed:
                n = len(buf)
                m = buf[-1]
                if row is not None and self.heron_emit_many is not None:
                    self.heron_emit_many(list(map(row, buf)), Stream.DEFAULT_STREAM_ID)
                    buf.clear()
                else:
                    while buf:
                        emit(buf.popleft(), None)
                self.positions[tp] = m.offset() + 1
                self._records += n
                continue
            source = self.source
            t = source.trackers.get(tp)
            if t is None:
                continue
            # Storm's emit allowance (ReplayableSource.may_emit), computed once per batch:
            # only emits below raise the uncommitted count, so each one spends one unit
            room = source.max_uncommitted - t.uncommitted()
            n = 0
            while buf and room > 0:
                # the whole allowance at once (a poll's records, usually): one tracker pass
                # for the batch (emitted_many); a stale record spends no allowance, so the
                # loop takes more while room is left
                if len(buf) <= room:
                    batch = list(buf)
                    buf.clear()
                else:
                    batch = [buf.popleft() for _ in range(room)]
                ids = source.emitted_many(tp, [(m.offset(), m) for m in batch])
                if tracked_rows is not None and emit_many is not None:
                    # the batch's fresh records in one call (a stale one has no id)
                    fresh = [(m, msg_id) for m, msg_id in zip(batch, ids, strict=True) if msg_id is not None]
                    if fresh:
                        emit_many([tracked_rows(m) for m, _ in fresh], [msg_id for _, msg_id in fresh])
                    n += len(fresh)
                else:
                    for m, msg_id in zip(batch, ids, strict=True):
                        if msg_id is not None:
                            emit(m, msg_id)
                            n += 1
                room = source.max_uncommitted - t.uncommitted()
            self._records += n

    def _make_record_emitter(self) -> Callable[[Any, Any], None]:
        """The per-record step (when the batch emits are not bound: a hook or a tap sees each
        emit): the built-in translators' row, else the user's translator (``_translate_emit``)."""
        row, emit = self._row, self.emit
        fn: Callable[[Any, Any], None]
        if row is None:
            fn = self._translate_emit
        else:
            def fn(m: Any, msg_id: Any) -> None:
                emit(row(m), tup_id=msg_id)
        self._emit_record = fn
        return fn

    def _emit(self, m: Any, msg_id: tuple[TP, int]) -> None:
        (self._emit_record or self._make_record_emitter())(m, msg_id)

    def _translate_emit(self, m: Any, msg_id: tuple[TP, int] | None) -> None:
        topic = m.topic()
        out = self.translator.translate(topic, m.partition(), m.offset(), self.key_de(topic, m.key()),
                                        self.value_de(topic, m.value()))
        if out is None:
            if msg_id is not None:
                self.source.ack(msg_id)  # skipped by the translator: done, so commits pass it
            return
        stream, values = out
        self.emit(values, tup_id=msg_id, stream=stream)

    # --- partitions ----------------------------------------------------------------------------
    def _refresh(self) -> None:
        try:
            md = self.consumer.list_topics(timeout=5)
        except Exception as e:  # the broker is unreachable: logged, retried at the next refresh
            self._on_error(e)
            return
        known = {t: tm for t, tm in md.topics.items() if tm.error is None}
        if self.cfg.topic_pattern is not None:
            rx = re.compile(self.cfg.topic_pattern)
            topics = [t for t in known if rx.fullmatch(t)]
        else:
            topics = [t for t in self.cfg.topics if t in known]
            for t in self.cfg.topics:
                if t not in known:
                    self._log_once(f"{self.where}: topic '{t}' does not exist on {self.cfg.bootstrap_servers}; "
                                   f"waiting for it (checked every {self.cfg.refresh_period_s:g} s)")
        partitions = [(t, p) for t in topics for p in known[t].partitions]
        mine = round_robin(partitions, self.index, self.tasks)
        if mine != self.assigned:
            self._reassign(mine)

    def _reassign(self, mine: list[TP]) -> None:
        from confluent_kafka import TopicPartition

        added = [tp for tp in mine if tp not in self.assigned]
        for tp in self.assigned:
            if tp not in mine:
                self.source.revoke(tp)
                self.buffers.pop(tp, None)
                if self.checkpointed:
                    self.positions.pop(tp, None)
                    self._complete.pop(tp, None)
        committed = self.consumer.committed(self._tps(added), timeout=10) if added else []
        starts: list[Any] = []
        restored: dict[TP, int] = {}
        for c in committed:
            tp = (c.topic, c.partition)
            ours = self._metadata_is_ours(getattr(c, "metadata", None))
            off = start_offset(self.cfg.first_poll, c.offset if c.offset >= 0 else None, ours)
            if self.checkpointed and self._restored and tp in self._restored:
                off = restored[tp] = self._restored[tp]  # the restored checkpoint's position wins
            if self.checkpointed and isinstance(off, int):
                self.positions[tp] = off
            pos = off if isinstance(off, int) else {"earliest": -2, "latest": -1}[off]
            starts.append(TopicPartition(tp[0], tp[1], pos))
            # an unknown start (earliest/latest) is learned from the first record
            self.source.assign(tp, off if isinstance(off, int) else -1)
        self.assigned = mine
        self.consumer.assign([*starts, *[TopicPartition(t, p) for t, p in mine if (t, p) not in added]])
        if not self.active:
            self.consumer.pause(self._tps(mine))
        self.log(f"{self.where}: assigned {len(mine)} partitions: {', '.join(f'{t}-{p}' for t, p in mine)}")
        if restored:
            # a restore target is complete, and the master's word for it may never come (lost, or
            # sent before this task restarted): its positions are committed here
            self._complete.update(restored)
            self._commit()

    def _metadata_is_ours(self, metadata: str | None) -> bool:
        try:
            return bool(metadata) and json.loads(metadata or "").get("topology") == self.topology
        except ValueError:
            return False

    @staticmethod
    def _tps(tps: Sequence[TP]) -> list[Any]:
        from confluent_kafka import TopicPartition
        return [TopicPartition(t, p) for t, p in tps]

    # --- commits -------------------------------------------------------------------------------
    def _commit(self, sync: bool = False) -> None:
        if self.checkpointed:
            # the complete positions not confirmed yet (after a word or a restore, and as a retry
            # at the periodic point), of the partitions this task holds: a revoked partition is
            # another task's to commit. Asynchronous even at close: a restore closes the
            # component, the broker may be what failed, and the new component commits the
            # restored positions itself
            due = {tp: off for tp, off in self._complete.items() if tp in self.assigned}
            if due:
                self._commit_offsets(due, sync=False)
            return
        if self.cfg.guarantee is PG.AT_MOST_ONCE:
            return
        offsets = self.source.commits()
        if offsets:
            self._commit_offsets(offsets, sync)

    def _commit_offsets(self, offsets: dict[TP, int], sync: bool) -> bool:
        """False when the commit failed (sync: as the broker answered; async: if the call did)."""
        from confluent_kafka import TopicPartition

        meta = json.dumps({"topology": self.topology, "task": self.context.get_task_id()})
        tps = [TopicPartition(t, p, off, metadata=meta) for (t, p), off in offsets.items()]
        try:
            consumer: Any = self.consumer  # the stubs' overloads want a literal flag
            got = consumer.commit(offsets=tps, asynchronous=not sync)
        except Exception as e:
            self._on_error(e)
            return False
        if sync and got is not None:
            self._on_commit(None, got)
            return all(tp.error is None for tp in got)
        return True

    def _on_commit(self, err: Any, partitions: list[Any]) -> None:
        if err is not None:
            self._on_error(err)
            return
        done = {(tp.topic, tp.partition): tp.offset for tp in partitions if tp.error is None and tp.offset >= 0}
        self.source.committed(done)
        if self.checkpointed:
            # confirmed: no retry; a newer position due meanwhile stays due
            for tp, off in done.items():
                if self._complete.get(tp) == off:
                    del self._complete[tp]
        self.log(f"{self.where}: committed " + ", ".join(f"{t}-{p}@{o}" for (t, p), o in sorted(done.items())) +
                 f" at {time.time():.6f}")

    # --- errors and metrics ----------------------------------------------------------------------
    def _on_error(self, err: Any) -> None:
        self._errors += 1
        self._log_once(f"{self.where}: kafka error on {self.cfg.bootstrap_servers}: {err}; retrying")

    def _log_once(self, line: str) -> None:
        if self.throttle.should_log(line):
            self.log(line, "warn")

    def _gave_up(self, tp: TP, offset: int, failures: int, _record: Any) -> None:
        self.log(f"{self.where}: record {tp[0]}-{tp[1]}@{offset} failed {failures} times; "
                 f"kafka.max.retries reached, committing past it", "error")

    def metrics_snapshot(self) -> dict[str, float]:
        from confluent_kafka import TopicPartition

        out: dict[str, float] = {"records": self._records, "errors": self._errors}
        self._records = self._errors = 0
        out.update({k: v for k, v in self.source.stats.take().items()})
        for tp, t in self.source.trackers.items():
            name = f"{tp[0]}-{tp[1]}"
            try:
                high = self.consumer.get_watermark_offsets(TopicPartition(*tp), cached=True)[1]
            except Exception:
                high = -1
            out[f"{name}/committed"] = t.committed
            out[f"{name}/fetched"] = t.fetched
            if high >= 0:
                out[f"{name}/lag"] = max(0, high - max(t.committed, 0))
        return out
