"""RabbitMQ for the Streamlet API: ``Builder.new_source(RabbitMQGenerator(url, "lines"))`` and
``streamlet.to_sink(RabbitMQSink(url, routing_key="out"))``.

A Streamlet source has no per-element ack, so the source acks a message once the element it
made was handed to the topology (the next ``get``): a crash of the source loses nothing (the
broker requeues what it had not acked), a crash downstream can (at most once past the source).
Use ``RabbitMQSpout`` in a topology for at least once. A body that is not UTF-8 is logged once
with its message id and rejected. The sink publishes each element with publisher confirms and
returns only when the broker confirmed it; while the broker is unreachable it retries with
backoff (one error line every 10 s), holding the stream back (backpressure)."""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from heron_py.api.streamlet.context import Context
from heron_py.api.streamlet.generator import Generator
from heron_py.api.streamlet.sink import Sink
from heron_py.connectors.base import RetryPolicy
from heron_py.connectors.common import LogThrottle, Reconnect
from heron_py.connectors.rabbitmq.bolt import body_of
from heron_py.connectors.rabbitmq.config import server_config
from heron_py.connectors.rabbitmq.errors import ErrorKind, classify, describe
from heron_py.connectors.rabbitmq.spout import decode_body, message_id


class RabbitMQGenerator(Generator):
    def __init__(self, url: str, queue: str, prefetch: int = 500, with_id: bool = False) -> None:
        """``with_id``: each element is (message id, body) instead of the body."""
        self.url, self.queue, self.prefetch, self.with_id = url, queue, prefetch, with_id

    def setup(self, context: Context) -> None:
        self.where = f"rabbitmq source task {context.get_task_id()}"
        self.server = server_config({"rabbitmq.url": self.url}, self.where)
        self.connection: Any = None
        self.channel: Any = None
        self.generation = 0
        self.buffer: deque[tuple[Any, Any, bytes]] = deque()
        self.to_ack: int | None = None  # the tag handed out last: acked at the next get
        self.conn = Reconnect(RetryPolicy(initial_s=0.1, max_delay_s=5.0))
        self.throttle = LogThrottle(time.monotonic)

    def _fill(self) -> None:
        now = time.monotonic()
        if not self.conn.ready(now):
            return
        try:
            if self.connection is None:
                self.connection = self.server.connect()
                ch = self.connection.channel()
                ch.queue_declare(self.queue, passive=True)
                ch.basic_qos(prefetch_count=self.prefetch)
                ch.basic_consume(self.queue, lambda _c, m, p, b: self.buffer.append((m, p, b)), auto_ack=False)
                self.channel = ch
                self.generation += 1
            if self.to_ack is not None:
                # multiple=True: everything handed out before it too
                self.channel.basic_ack(self.to_ack, multiple=True)
                self.to_ack = None
            self.connection.process_data_events(time_limit=0.01)
        except Exception as e:
            self.connection, self.channel, self.to_ack = None, None, None
            self.buffer.clear()
            self.conn.failed(now)
            line = describe(e, self.where, self.server.address(), self.server.user, 5.0, queue=self.queue)
            if self.throttle.should_log(line):
                self.logger.warning(line)
            return
        self.conn.ok()

    def get(self) -> Any:
        while True:
            if not self.buffer:
                self._fill()
                if not self.buffer:
                    return None
            method, props, body = self.buffer.popleft()
            tag = int(method.delivery_tag)
            self.to_ack = tag
            mid = message_id(props, self.generation, tag)
            value, why = decode_body(body, True)
            if value is None:
                self.logger.error(f"{self.where}: message {mid} (delivery tag {tag}) of queue '{self.queue}' is "
                                  f"malformed: {why}; skipped")
                continue
            return (mid, value) if self.with_id else value


class RabbitMQSink(Sink):
    def __init__(self, url: str, routing_key: str, exchange: str = "") -> None:
        self.url, self.routing_key, self.exchange = url, routing_key, exchange

    def setup(self, context: Context) -> None:
        self.where = f"rabbitmq sink task {context.get_task_id()}"
        self.server = server_config({"rabbitmq.url": self.url}, self.where)
        self.channel: Any = None
        self.connection: Any = None
        self.conn = Reconnect(RetryPolicy(initial_s=0.1, max_delay_s=5.0))
        self.throttle = LogThrottle(time.monotonic)
        self.errors = 0

    def put(self, element: Any) -> None:
        import pika
        import pika.exceptions as px

        props = pika.BasicProperties(delivery_mode=2)
        while True:
            try:
                if self.channel is None:
                    self.connection = self.server.connect()
                    ch = self.connection.channel()
                    ch.confirm_delivery()
                    self.channel = ch
                self.channel.basic_publish(self.exchange, self.routing_key, body_of(element), props, mandatory=True)
                self.conn.ok()
                return
            except (px.UnroutableError, px.NackError):
                raise  # refused by the broker: the task's error, as any sink's
            except Exception as e:
                if classify(e) is ErrorKind.OTHER:
                    raise
                self.channel = None
                self.errors += 1
                delay = self.conn.failed(time.monotonic())
                line = describe(e, self.where, self.server.address(), self.server.user, 5.0,
                                exchange=self.exchange)
                if self.throttle.should_log(line):
                    self.logger.warning(line)
                time.sleep(delay)

    @property
    def logger(self) -> logging.Logger:
        return logging.getLogger(f"heron_py.streamlet.{type(self).__name__}")

    def cleanup(self) -> None:
        if self.connection is not None and self.connection.is_open:
            self.connection.close()
