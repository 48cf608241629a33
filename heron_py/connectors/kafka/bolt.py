"""KafkaBolt: storm-kafka-client's bolt. Each input is produced as one record (key and value
fields by the mapper, Storm's FieldNameBasedTupleToKafkaMapper: "key" and "message" by
default; the topic is ``kafka.topic`` or the field ``kafka.topic.field``). At least once, the
input is acked when the broker confirmed the record and failed on a delivery error; with
``kafka.fire.and.forget`` it is acked at once. The producer is idempotent."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.connectors.common import LogThrottle, TupleFields, component_where
from heron_py.connectors.kafka.config import BoltConfig, bolt_config
from heron_py.connectors.kafka.spout import REQUIREMENT
from heron_py.connectors.kafka.translators import serializer


class KafkaBolt(Bolt):
    outputs: list[Any] = []
    requirements = [REQUIREMENT]
    # the runner polls the producer for delivery reports between inputs (heron_poll)
    heron_poll_interval_s = 0.005
    clock: Callable[[], float] = time.monotonic

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        from confluent_kafka import Producer

        self.context = context
        self.where = component_where("kafka bolt", context)
        self.cfg: BoltConfig = bolt_config(config, self.where)
        self.key_ser = serializer(self.where, "kafka.key.serializer", self.cfg.key_serializer)
        self.value_ser = serializer(self.where, "kafka.value.serializer", self.cfg.value_serializer)
        self.fields = TupleFields(context)  # a missing field is a null key/value (Storm's mapper)
        self.throttle = LogThrottle(self.clock, period_s=10.0)
        self.producer = Producer({**self.cfg.client_config(), "error_cb": self._on_error})

    def process(self, tup: Any) -> None:
        topic = (self.fields.get(tup, self.cfg.topic_field) if self.cfg.topic_field else None) or self.cfg.topic
        if not topic:
            self.log(f"{self.where}: input from '{tup.component}' has no topic in field "
                     f"'{self.cfg.topic_field}'; failing it", "warn")
            self.fail(tup)
            return
        key = self.key_ser(self.fields.get(tup, self.cfg.key_field))
        value = self.value_ser(self.fields.get(tup, self.cfg.message_field))
        cb = None if self.cfg.fire_and_forget else (lambda err, _msg, t=tup: self._delivered(err, t))
        while True:
            try:
                self.producer.produce(str(topic), value=value, key=key, on_delivery=cb)
                break
            except BufferError:  # the client's queue is full: wait for deliveries
                self.producer.poll(0.05)
        if self.cfg.fire_and_forget:
            self.ack(tup)
        self.producer.poll(0)

    def _delivered(self, err: Any, tup: Any) -> None:
        if err is None:
            self.ack(tup)
        else:
            self._on_error(err)
            self.fail(tup)

    def heron_poll(self) -> None:
        self.producer.poll(0)

    def _on_error(self, err: Any) -> None:
        line = f"{self.where}: kafka error on {self.cfg.bootstrap_servers}: {err}"
        if self.throttle.should_log(line):
            self.log(line, "warn")

    def cleanup(self) -> None:
        self.producer.flush(10)
