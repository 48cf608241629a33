"""KafkaBolt: storm-kafka-client's bolt. Each input is produced as one record (key and value
fields by the mapper, Storm's FieldNameBasedTupleToKafkaMapper: "key" and "message" by
default; the topic is ``kafka.topic`` or the field ``kafka.topic.field``). At least once, the
input is acked when the broker confirmed the record and failed on a delivery error; with
``kafka.fire.and.forget`` it is acked at once. The producer is idempotent."""

from __future__ import annotations

import time
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.connectors.kafka.config import BoltConfig, bolt_config
from heron_py.connectors.kafka.spout import REQUIREMENT
from heron_py.connectors.kafka.translators import serializer


class KafkaBolt(Bolt):
    outputs: list[Any] = []
    requirements = [REQUIREMENT]
    # the runner polls the producer for delivery reports between inputs (heron_poll)
    heron_poll_interval_s = 0.005

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        from confluent_kafka import Producer

        self.context = context
        self.where = f"kafka bolt '{context.get_component_id()}' task {context.get_task_id()}"
        self.cfg: BoltConfig = bolt_config(config, self.where)
        self.key_ser = serializer(self.where, "kafka.key.serializer", self.cfg.key_serializer)
        self.value_ser = serializer(self.where, "kafka.value.serializer", self.cfg.value_serializer)
        self._fields: dict[tuple[str, str], tuple[str, ...]] = {}
        self._last_error = ("", 0.0)
        self.producer = Producer({**self.cfg.client_config(), "error_cb": self._on_error})

    def _fields_of(self, tup: Any) -> tuple[str, ...]:
        key = (tup.component, tup.stream)
        f = self._fields.get(key)
        if f is None:
            comp = self.context.topology.component(tup.component)
            stream = comp.output(tup.stream) if comp is not None else None
            f = tuple(stream.fields) if stream is not None else ()
            self._fields[key] = f
        return f

    def _field(self, tup: Any, name: str) -> Any:
        fields = self._fields_of(tup)
        if name not in fields:
            return None  # Storm's mapper: a missing field is a null key/value
        return tup.values[fields.index(name)]

    def process(self, tup: Any) -> None:
        topic = (self._field(tup, self.cfg.topic_field) if self.cfg.topic_field else None) or self.cfg.topic
        if not topic:
            self.log(f"{self.where}: input from '{tup.component}' has no topic in field "
                     f"'{self.cfg.topic_field}'; failing it", "warn")
            self.fail(tup)
            return
        key = self.key_ser(self._field(tup, self.cfg.key_field))
        value = self.value_ser(self._field(tup, self.cfg.message_field))
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
        now = time.monotonic()
        if line != self._last_error[0] or now - self._last_error[1] >= 10:
            self._last_error = (line, now)
            self.log(line, "warn")

    def cleanup(self) -> None:
        self.producer.flush(10)
