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

The spout is three parts: the Spout the engine drives (this class), the partition
reader (``reader.py``: the consumer, assignment, the poll, seeks and commit calls) and the
delivery mode (``delivery.py``: ``Tracked``, ``PassThrough`` or ``Checkpointed``), chosen once
at ``initialize``; its contracts with the engine are heron_py/api/contracts.py's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from heron_py.api.metrics import IMetric
from heron_py.api.spout.spout import Spout
from heron_py.api.state.state import State
from heron_py.api.stream import Stream
from heron_py.common.config import MODE
from heron_py.connectors.common import component_where, source_acking
from heron_py.connectors.kafka.config import ProcessingGuarantee as PG
from heron_py.connectors.kafka.config import SpoutConfig, spout_config
from heron_py.connectors.kafka.delivery import (
    POSITIONS_KEY,
    Checkpointed,
    Delivery,
    delivery_for,
    newest_complete,
    positions_from_state,
    positions_to_state,
)
from heron_py.connectors.kafka.offsets import TP, KafkaOffsets
from heron_py.connectors.kafka.reader import PartitionReader, round_robin, start_offset
from heron_py.connectors.kafka.translators import (
    JAVA_DESERIALIZERS,
    RecordTranslator,
    ValueRecordTranslator,
    deserializer,
    translator,
)

__all__ = ["POSITIONS_KEY", "KafkaSpout", "newest_complete", "positions_from_state", "positions_to_state",
           "record_rows", "record_values", "round_robin", "start_offset"]


class _KafkaMetrics(IMetric):
    def __init__(self, spout: KafkaSpout) -> None:
        self.spout = spout

    def get_value_and_reset(self) -> dict[str, float]:
        return self.spout.metrics_snapshot()


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


def record_rows(values: Callable[[Any], list[Any]] | None, strings_record: bool
                ) -> Callable[[TP, Iterable[Any]], list[list[Any]]] | None:
    """The rows of a batch of one partition's records (``values`` of each): for the default
    translator with string deserializers, the topic and partition are the batch's and each row is
    built inline in one loop (no call per record but the record's own getters); None when
    ``values`` is None (a user's translator)."""
    if values is None:
        return None
    if not strings_record:
        def rows(tp: TP, msgs: Iterable[Any]) -> list[list[Any]]:
            return list(map(values, msgs))
        return rows

    def string_rows(tp: TP, msgs: Iterable[Any]) -> list[list[Any]]:
        t, p = tp
        out: list[list[Any]] = []
        append = out.append
        for m in msgs:
            k, v = m.key(), m.value()
            append([t, p, m.offset(), None if k is None else k.decode("utf-8", "replace"),
                    None if v is None else v.decode("utf-8", "replace")])
        return out
    return string_rows


class KafkaSpout(Spout):
    """Configured by the component's config (``kafka.*``, see docs/connectors/kafka.md)."""
    # its positions map partition -> offset, each saved by the one task that had the partition:
    # a rescale gives every new task all of them (heron_py/runtime/rescale.py merge, Flink's
    # union redistribution), and each seeks only the partitions it is assigned now
    heron_state_rescale = "merge"

    # effectively once: the positions init_state restored (None: not restored, or another mode)
    _restored: dict[TP, int] | None = None
    _state: State | None = None
    # effectively once: the delivery mode that keeps the positions (None in the other modes)
    _checkpoints: Checkpointed | None = None

    outputs = ["topic", "partition", "offset", "key", "value"]
    clock: Callable[[], float] = time.monotonic
    # the last next_tuple waited in the consumer's poll (read by the engine's spout loop, which
    # then adds no idle wait of its own: SpoutHost.waited_for_input; contracts.WaitingSource)
    heron_waited = False
    # bound by the engine's host when nothing needs to see each emit (no hook, no tap): a poll's
    # tuples in one call, untracked (heron_emit_many) or with their message ids (runtime/host.py;
    # contracts.BatchEmitSource, TrackedBatchEmitSource and TrackedRunEmitSource)
    heron_emit_many: Callable[[list[Any], str], None] | None = None
    heron_emit_tracked_many: Callable[[list[Any], Sequence[Any]], None] | None = None
    heron_emit_tracked_run: Callable[[list[Any], Any], None] | None = None

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
        self._batch_rows = (record_rows(self._row, strings and type(self.translator) is RecordTranslator)
                            if type(self).emit is Spout.emit else None)
        tasks = sorted(context.get_component_tasks(comp) or [context.get_task_id()])
        share = tasks.index(context.get_task_id()), len(tasks)
        # tracking needs the engine's acking: without it ids are never acked and commits would stall
        mode = MODE.parse(config)  # the engine's key (submit refused a bad value)
        # effectively once has no acking: positions travel in checkpoints instead
        self.checkpointed = mode == "EFFECTIVELY_ONCE"
        self.tracked = self.cfg.guarantee is PG.AT_LEAST_ONCE and source_acking(config)
        # NO_GUARANTEE and AT_MOST_ONCE outside effectively once track no record: a poll batch
        # is emitted as it came and only each partition's consumed position is kept
        self.untracked = not self.checkpointed and not self.tracked
        if self.checkpointed:
            self._log_checkpointed()
        elif self.cfg.guarantee is PG.AT_LEAST_ONCE and not self.tracked:
            self.log(f"{self.where}: kafka.processing.guarantee AT_LEAST_ONCE needs topology.reliability.mode "
                     f"ATLEAST_ONCE, found {mode}; committing periodically without tracking (NO_GUARANTEE)", "warn")
        self.source = KafkaOffsets(self.cfg.retry, self.cfg.max_uncommitted, self._gave_up)
        self.reader = reader = PartitionReader(self.cfg, self.where, self.topology, context.get_task_id(), share,
                                               self.source, self.log, self.clock)
        self.delivery: Delivery = delivery_for(self, reader, self.source, self.checkpointed, self.tracked)
        reader.delivery = self.delivery
        if isinstance(self.delivery, Checkpointed):
            self._checkpoints = self.delivery
            self.positions = self.delivery.positions  # the live dict (KafkaSource's state holds it)
        # the mode's steps, bound once: next_tuple calls them, no lookup per call
        self._received, self._drain, self._commit = self.delivery.received, self.delivery.drain, self.delivery.commit
        self.consumer = reader.consumer = Consumer({**self.cfg.client_config(), "error_cb": reader.on_error,
                                                    "on_commit": reader.on_commit})
        now = self.clock()
        self._next_refresh = now
        self._next_commit = now + self.cfg.commit_period_s
        context.register_metric("kafka", _KafkaMetrics(self), 10)

    # --- effectively once (contracts.CheckpointedComponent, CheckpointCommitter) ---------------
    def init_state(self, stateful_state: State) -> None:
        """Called before ``initialize``: the positions of the restored checkpoint (none at a
        clean start)."""
        self._state = stateful_state
        self._restored = positions_from_state(stateful_state.get(POSITIONS_KEY))

    def pre_save(self, checkpoint_id: str) -> None:
        if self._checkpoints is None or self._state is None:
            return
        self._checkpoints.save(self._state, checkpoint_id)

    def _log_checkpointed(self) -> None:
        if self.cfg.guarantee is not PG.AT_LEAST_ONCE:
            self.log(f"{self.where}: kafka.processing.guarantee {self.cfg.guarantee.value} is ignored in "
                     f"EFFECTIVELY_ONCE mode: positions are checkpointed", "warn")
        if self._restored:
            self.log(f"{self.where}: restored positions " +
                     ", ".join(f"{t}-{p}@{o}" for (t, p), o in sorted(self._restored.items())))

    def on_checkpoint_complete(self, checkpoint_id: int) -> None:
        """The master's word that ``checkpoint_id`` is complete (``StatefulTask.checkpoint_committed``):
        the positions saved for the newest checkpoint at or below it become the ones to commit,
        and every saved checkpoint up to it is forgotten (a newer complete one supersedes it)."""
        if self._checkpoints is not None:
            self._checkpoints.complete(checkpoint_id)

    def activate(self) -> None:
        self.reader.activate()

    def deactivate(self) -> None:
        self.reader.deactivate()

    def close(self) -> None:
        try:
            self._commit(sync=True)
        finally:
            self.consumer.close()

    # --- the loop ------------------------------------------------------------------------------
    def next_tuple(self) -> None:
        self.heron_waited = False
        now = self.clock()
        reader = self.reader
        if now >= self._next_refresh:
            reader.refresh()
            self._next_refresh = now + self.cfg.refresh_period_s
        if now >= self._next_commit:
            self._commit()
            self._next_commit = now + self.cfg.commit_period_s
        if not reader.active:
            time.sleep(0.01)
            return
        if not any(reader.buffers.values()):
            msgs = reader.poll()
            self.heron_waited = reader.waited
            if msgs:
                self._received(msgs)
        self._drain(now)

    def ack(self, tup_id: Any) -> None:
        self.source.ack(tup_id)

    def heron_ack_many(self, tup_ids: list[Any]) -> None:
        """``ack`` for a result frame's acked ids at once (the engine calls it instead of ``ack``
        per id when no hook must see each ack; contracts.BatchAckSource); the ids as emitted:
        ints, a batch's run and the record's place in it (``offsets.py``)."""
        self.source.ack_many(tup_ids)

    def fail(self, tup_id: Any) -> None:
        self.source.fail(tup_id, self.clock())

    # --- errors and metrics ----------------------------------------------------------------------
    def _gave_up(self, tp: TP, offset: int, failures: int, _record: Any) -> None:
        self.log(f"{self.where}: record {tp[0]}-{tp[1]}@{offset} failed {failures} times; "
                 f"kafka.max.retries reached, committing past it", "error")

    def metrics_snapshot(self) -> dict[str, float]:
        from confluent_kafka import TopicPartition

        delivery, reader = self.delivery, self.reader
        out: dict[str, float] = {"records": delivery.records, "errors": reader.errors}
        delivery.records = reader.errors = 0
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
