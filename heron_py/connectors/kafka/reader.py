"""The Kafka spout's partition reader: this task's share of the topics' partitions and its
consumer. It assigns them (``round_robin``, refreshed every ``kafka.partition.refresh.period.ms``;
no consumer-group rebalancing between tasks), polls, seeks, and sends commits; what a poll's
records become, and which offsets are due for a commit, is the delivery mode's
(``heron_py.connectors.kafka.delivery``)."""

from __future__ import annotations

import json
import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from heron_py.connectors.common import LogThrottle
from heron_py.connectors.kafka.config import FirstPollOffsetStrategy as FP
from heron_py.connectors.kafka.config import SpoutConfig
from heron_py.connectors.kafka.offsets import TP, KafkaOffsets

if TYPE_CHECKING:
    from heron_py.connectors.kafka.delivery import Delivery


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


def _tps(tps: Sequence[TP]) -> list[Any]:
    from confluent_kafka import TopicPartition
    return [TopicPartition(t, p) for t, p in tps]


class PartitionReader:
    """The consumer side of a KafkaSpout task. ``delivery`` (set by the spout once both exist)
    hears of revoked, started and confirmed partitions; ``consumer`` is opened by the spout with
    ``on_error`` and ``on_commit`` as its callbacks."""

    consumer: Any
    delivery: Delivery

    def __init__(self, cfg: SpoutConfig, where: str, topology: str, task_id: int, share: tuple[int, int],
                 source: KafkaOffsets, log: Callable[..., None], clock: Callable[[], float]) -> None:
        self.cfg, self.where, self.topology, self.task_id = cfg, where, topology, task_id
        self.index, self.tasks = share
        self.source, self.log = source, log
        self.assigned: list[TP] = []
        self.buffers: dict[TP, deque[Any]] = {}
        self.active = True
        # the client retries with its own backoff; the same line is logged at most every 10 s
        self.throttle = LogThrottle(clock, period_s=10.0)
        self.errors = 0  # kafka errors seen (client callbacks, failed commits, record errors)
        self.waited = False  # the last poll waited on the consumer (the spout's heron_waited)
        self._last_poll_empty = False

    def activate(self) -> None:
        self.active = True
        if self.assigned:
            self.consumer.resume(_tps(self.assigned))

    def deactivate(self) -> None:
        # a deactivated spout stops polling (Storm pauses the consumer); in-flight acks still count
        self.active = False
        if self.assigned:
            self.consumer.pause(_tps(self.assigned))

    # --- polling -------------------------------------------------------------------------------
    def poll(self) -> list[Any]:
        """A poll's records and errors, as the consumer gave them (empty: none, or no partition)."""
        self.waited = False
        if not self.assigned:
            return []
        cfg, consumer = self.cfg, self.consumer
        if self._last_poll_empty and cfg.poll_timeout_s > 0:
            # librdkafka's consume(n, timeout) returns when n records came or the timeout ran
            # out, so a 500-record poll at a few thousand records/s always waited the whole
            # timeout. Wait for the first record only, then take what else is ready. Only
            # after a look that found nothing: the engine flushed this spout's emits before it
            # called again, so nothing emitted waits here with it.
            msgs: list[Any] = consumer.consume(1, cfg.poll_timeout_s)
            self.waited = True
            if msgs and cfg.max_poll_records > 1:
                msgs += consumer.consume(cfg.max_poll_records - 1, 0)
        else:
            msgs = consumer.consume(cfg.max_poll_records, 0)
        self._last_poll_empty = not msgs
        return msgs

    def seek(self, offsets: dict[TP, int]) -> None:
        from confluent_kafka import TopicPartition

        for (t, p), off in offsets.items():
            try:
                self.consumer.seek(TopicPartition(t, p, off))
            except Exception as e:  # the partition was revoked meanwhile: nothing to re-read
                self.on_error(e)

    # --- partitions ----------------------------------------------------------------------------
    def refresh(self) -> None:
        try:
            md = self.consumer.list_topics(timeout=5)
        except Exception as e:  # the broker is unreachable: logged, retried at the next refresh
            self.on_error(e)
            return
        known = {t: tm for t, tm in md.topics.items() if tm.error is None}
        if self.cfg.topic_pattern is not None:
            rx = re.compile(self.cfg.topic_pattern)
            topics = [t for t in known if rx.fullmatch(t)]
        else:
            topics = [t for t in self.cfg.topics if t in known]
            for t in self.cfg.topics:
                if t not in known:
                    self.log_once(f"{self.where}: topic '{t}' does not exist on {self.cfg.bootstrap_servers}; "
                                  f"waiting for it (checked every {self.cfg.refresh_period_s:g} s)")
        partitions = [(t, p) for t in topics for p in known[t].partitions]
        mine = round_robin(partitions, self.index, self.tasks)
        if mine != self.assigned:
            self._reassign(mine)

    def _reassign(self, mine: list[TP]) -> None:
        from confluent_kafka import TopicPartition

        delivery = self.delivery
        added = [tp for tp in mine if tp not in self.assigned]
        for tp in self.assigned:
            if tp not in mine:
                self.source.revoke(tp)
                self.buffers.pop(tp, None)
                delivery.revoked(tp)
        committed = self.consumer.committed(_tps(added), timeout=10) if added else []
        starts: list[Any] = []
        for c in committed:
            tp = (c.topic, c.partition)
            ours = self._metadata_is_ours(getattr(c, "metadata", None))
            off = delivery.start(tp, start_offset(self.cfg.first_poll, c.offset if c.offset >= 0 else None, ours))
            pos = off if isinstance(off, int) else {"earliest": -2, "latest": -1}[off]
            starts.append(TopicPartition(tp[0], tp[1], pos))
            # an unknown start (earliest/latest) is learned from the first record
            self.source.assign(tp, off if isinstance(off, int) else -1)
        self.assigned = mine
        self.consumer.assign([*starts, *[TopicPartition(t, p) for t, p in mine if (t, p) not in added]])
        if not self.active:
            self.consumer.pause(_tps(mine))
        self.log(f"{self.where}: assigned {len(mine)} partitions: {', '.join(f'{t}-{p}' for t, p in mine)}")
        delivery.assigned()

    def _metadata_is_ours(self, metadata: str | None) -> bool:
        try:
            return bool(metadata) and json.loads(metadata or "").get("topology") == self.topology
        except ValueError:
            return False

    # --- commits -------------------------------------------------------------------------------
    def commit_offsets(self, offsets: dict[TP, int], sync: bool) -> bool:
        """False when the commit failed (sync: as the broker answered; async: if the call did)."""
        from confluent_kafka import TopicPartition

        meta = json.dumps({"topology": self.topology, "task": self.task_id})
        tps = [TopicPartition(t, p, off, metadata=meta) for (t, p), off in offsets.items()]
        try:
            consumer: Any = self.consumer  # the stubs' overloads want a literal flag
            got = consumer.commit(offsets=tps, asynchronous=not sync)
        except Exception as e:
            self.on_error(e)
            return False
        if sync and got is not None:
            self.on_commit(None, got)
            return all(tp.error is None for tp in got)
        return True

    def on_commit(self, err: Any, partitions: list[Any]) -> None:
        if err is not None:
            self.on_error(err)
            return
        done = {(tp.topic, tp.partition): tp.offset for tp in partitions if tp.error is None and tp.offset >= 0}
        self.source.committed(done)
        self.delivery.confirmed(done)
        self.log(f"{self.where}: committed " + ", ".join(f"{t}-{p}@{o}" for (t, p), o in sorted(done.items())) +
                 f" at {time.time():.6f}")

    # --- errors --------------------------------------------------------------------------------
    def on_error(self, err: Any) -> None:
        self.errors += 1
        self.log_once(f"{self.where}: kafka error on {self.cfg.bootstrap_servers}: {err}; retrying")

    def log_once(self, line: str) -> None:
        if self.throttle.should_log(line):
            self.log(line, "warn")
