"""KafkaBolt: storm-kafka-client's bolt. Each input is produced as one record (key and value
fields by the mapper, Storm's FieldNameBasedTupleToKafkaMapper: "key" and "message" by
default; the topic is ``kafka.topic`` or the field ``kafka.topic.field``). At least once, the
input is acked when the broker confirmed the record and failed on a delivery error; with
``kafka.fire.and.forget`` it is acked at once. The producer is idempotent.

A producer that can no longer deliver (a fatal error, or a record timed out: the idempotent
producer loops silently on a broker that lost its state, inflight.py) is replaced by a new
one: every input still waiting for its report is failed first, so the spout replays it, and
one line says why. Nothing is dropped silently."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.connectors.common import LogThrottle, TupleFields, component_where
from heron_py.connectors.kafka.config import BoltConfig, bolt_config
from heron_py.connectors.kafka.inflight import InFlight, rebuild_after_poll, rebuild_reason
from heron_py.connectors.kafka.translators import serializer

# the backstop past message.timeout.ms before inputs with no report at all count as lost
# (librdkafka reports a timeout itself; this covers a producer that says nothing)
BACKSTOP_GRACE_S = 5.0


class KafkaBolt(Bolt):
    outputs: list[Any] = []
    # the runner polls the producer for delivery reports between inputs (heron_poll), every
    # 5 ms while a record waits for its report, every 100 ms with none (heron_busy false): an
    # idle bolt's error callbacks and fire-and-forget reports wait that long, nothing else does
    heron_poll_interval_s = 0.005
    heron_idle_poll_interval_s = 0.1
    clock: Callable[[], float] = time.monotonic

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.context = context
        self.where = component_where("kafka bolt", context)
        self.cfg: BoltConfig = bolt_config(config, self.where)
        self.key_ser = serializer(self.where, "kafka.key.serializer", self.cfg.key_serializer)
        self.value_ser = serializer(self.where, "kafka.value.serializer", self.cfg.value_serializer)
        self.fields = TupleFields(context)  # a missing field is a null key/value (Storm's mapper)
        self.throttle = LogThrottle(self.clock, period_s=10.0)
        self.inflight = InFlight()
        self._routes: dict[tuple[str, str], tuple[int, int, int]] = {}
        self._topic, self._at_once = self.cfg.topic, self.cfg.fire_and_forget
        self._now = self.clock()
        self.backstop_s = self.cfg.message_timeout_ms / 1000.0 + BACKSTOP_GRACE_S
        # set by callbacks, acted on after the producer's poll returns: the producer is never
        # replaced from inside its own callback
        self.rebuild_why: str | None = None
        self.rebuilds = 0
        self.producer = self._new_producer()

    def _new_producer(self) -> Any:
        from confluent_kafka import Producer
        return Producer({**self.cfg.client_config(), "error_cb": self._on_error})

    def process(self, tup: Any) -> None:
        route = self._routes.get((tup.component, tup.stream))
        if route is None:
            route = self._routes[(tup.component, tup.stream)] = self._route(tup)
        topic_at, key_at, message_at = route
        values = tup.values
        topic = (values[topic_at] if topic_at >= 0 else None) or self._topic
        if not topic:
            self.log(f"{self.where}: input from '{tup.component}' has no topic in field "
                     f"'{self.cfg.topic_field}'; failing it", "warn")
            self.fail(tup)
            return
        key = self.key_ser(values[key_at] if key_at >= 0 else None)
        value = self.value_ser(values[message_at] if message_at >= 0 else None)
        # fire and forget: acked now (id 0), yet its report still tells a wedged producer. The
        # send time is the last poll's (a round of input batches old at most): it only feeds the
        # backstop, seconds past message.timeout.ms
        ident = 0 if self._at_once else self.inflight.add(tup, self._now)
        cb = partial(self._delivered, ident)
        while True:
            try:
                self.producer.produce(str(topic), value=value, key=key, on_delivery=cb)
                break
            except BufferError:  # the client's queue is full: wait for deliveries
                self._poll(0.05)
        if self._at_once:
            self.ack(tup)
        # delivery reports are served by heron_poll, which the task's loop calls after each
        # round of input batches (and every heron_poll_interval_s when idle): a poll per input
        # was ~10 % of the bolt's time at 30,000 records/s, and reports come per produced batch

    def _route(self, tup: Any) -> tuple[int, int, int]:
        """Where an input stream's tuples hold the topic, key and message fields (-1: not in
        that stream; a missing field is a null key or value, as Storm's mapper has it), looked
        up once per (component, stream): a lookup by name per record was a sixth of the task's
        time at its peak."""
        names = self.fields.names(tup)
        cfg = self.cfg
        return tuple(names.index(f) if f and f in names else -1  # type: ignore[return-value]
                     for f in (cfg.topic_field, cfg.key_field, cfg.message_field))

    def _delivered(self, ident: int, err: Any, _msg: Any) -> None:
        tup = self.inflight.pop(ident) if ident else None
        if err is None:
            if tup is not None:
                self.ack(tup)
            return
        why = rebuild_reason(err.code(), err.fatal(), err.str())
        if why is not None and self.rebuild_why is None:
            self.rebuild_why = why
        if tup is not None:  # None: failed already at a rebuild (its purge reports it again)
            self._on_error(err)
            self.fail(tup)

    def _poll(self, timeout_s: float) -> None:
        self.producer.poll(timeout_s)
        self._now = now = self.clock()
        why = rebuild_after_poll(self.rebuild_why, self.inflight, now, self.backstop_s)
        if why is not None:
            self._rebuild(why)

    def heron_poll(self) -> None:
        self._poll(0)

    def heron_busy(self) -> bool:
        """Inputs wait for their delivery reports (an in-process run keeps polling until none do)."""
        return len(self.inflight) > 0

    def _rebuild(self, why: str) -> None:
        """Fails every input still waiting (the spout replays them), then swaps in a new
        producer. The old one's queue is purged: a record in flight may still land, so a
        replay can write a copy (at least once), never a loss."""
        old, self.producer = self.producer, self._new_producer()
        self.rebuild_why = None
        self.rebuilds += 1
        waiting = self.inflight.take_all()
        for tup in waiting:
            self.fail(tup)
        self.log(f"{self.where}: rebuilding the Kafka producer for {self.cfg.bootstrap_servers} "
                 f"(rebuild {self.rebuilds}): {why}; failed {len(waiting)} inputs waiting for "
                 f"delivery, the spout replays them", "warn")
        old.purge()
        old.flush(0)  # delivers the purge reports: their inputs were failed above, so ignored

    def _on_error(self, err: Any) -> None:
        if err.fatal() and self.rebuild_why is None:  # error_cb runs inside poll(): acted on after
            self.rebuild_why = f"fatal producer error: {err.str()}"
        line = f"{self.where}: kafka error on {self.cfg.bootstrap_servers}: {err}"
        if self.throttle.should_log(line):
            self.log(line, "warn")

    def cleanup(self) -> None:
        self.producer.flush(10)
