"""RabbitMQBolt: each input published with publisher confirms, acked when the broker confirmed it.

The channel is in confirm mode and messages are published ``mandatory`` (``rabbitmq.mandatory``)
and persistent (``rabbitmq.persistent``): an input is acked only after the broker confirmed its
message (for a durable queue: written to disk), and failed when the broker nacked it or returned
it unroutable (one line naming the input; the spout replays it). Inputs are batched
(``rabbitmq.batch.size``, ``rabbitmq.batch.delay.ms``; the base's ``AckedSink``): a batch is
published when full or old enough, and while the broker is unreachable a batch's inputs are
failed and the bolt waits with backoff before it publishes again (metric
``connection-errors``). pika's BlockingConnection is not thread-safe: it is used only from the
task's thread (process and heron_poll).

The message: the body is the field ``rabbitmq.body.field`` (str or bytes as they are) or, by
default, a JSON object of all the input's fields; the routing key is ``rabbitmq.routing.key``
or the field ``rabbitmq.routing.key.field``; the message_id property is the field
``rabbitmq.message.id.field`` (a consumer de-duplicates replays by it)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.connectors.base import BatchPolicy
from heron_py.connectors.common import LogThrottle, Reconnect, TupleFields, component_where
from heron_py.connectors.rabbitmq.config import BoltConfig, bolt_config, close_connection
from heron_py.connectors.rabbitmq.errors import on_connection_error
from heron_py.connectors.sink import CountsMetric, SinkLoop, bad_input_line


def body_of(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return json.dumps(value, default=str).encode("utf-8")


def build_message(cfg: BoltConfig, fields: dict[str, Any]) -> tuple[str, bytes, str | None]:
    """(routing key, body, message id) of an input's fields; ValueError saying what is missing."""
    if cfg.routing_key is not None:
        rk = cfg.routing_key
    else:
        v = fields.get(cfg.routing_key_field or "")
        if v is None or v == "":
            raise ValueError(f"expected a routing key in field '{cfg.routing_key_field}', found {v!r}")
        rk = str(v)
    if cfg.body_field is not None:
        if cfg.body_field not in fields:
            raise ValueError(f"expected field '{cfg.body_field}' (rabbitmq.body.field), found {sorted(fields)}")
        body = body_of(fields[cfg.body_field])
    else:
        body = body_of(fields)
    mid = None
    if cfg.id_field is not None:
        if fields.get(cfg.id_field) is None:
            raise ValueError(f"expected field '{cfg.id_field}' (rabbitmq.message.id.field), found {sorted(fields)}")
        mid = str(fields[cfg.id_field])
    return rk, body, mid


class RabbitMQBolt(Bolt):
    outputs: list[Any] = []
    heron_poll_interval_s = 0.005  # the runner calls heron_poll: a batch's delay and heartbeats while idle
    clock: Callable[[], float] = time.monotonic

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.context = context
        self.where = component_where("rabbitmq bolt", context)
        self.cfg: BoltConfig = bolt_config(config, self.where)
        self.address = self.cfg.server.address()
        self.fields = TupleFields(context)
        self.connection: Any = None
        self.channel: Any = None
        self.impl: Any = None
        self.seq = 0
        self.outstanding: dict[int, tuple[str, bytes]] = {}  # published, not yet confirmed: (routing key, body)
        self.outcome: dict[int, str] = {}  # tag → "ack", "nack" or "return"
        self.conn = Reconnect(self.cfg.reconnect)
        self.loop: SinkLoop[tuple[Any, tuple[str, bytes, str | None]], list[int]] = SinkLoop(
            BatchPolicy(self.cfg.batch, self.cfg.batch_delay_s), self.conn, self.clock, self._publish,
            self._confirmed, self._failed, self._recovered)
        self.throttle = LogThrottle(self.clock)
        self.counts = {"published": 0, "failed": 0, "connection-errors": 0, "bad-inputs": 0, "nacked": 0,
                       "returned": 0}
        self._next_heartbeat = 0.0
        context.register_metric("rabbitmq", CountsMetric(self.counts), 10)

    def _connect(self) -> None:
        import pika

        self.connection = self.cfg.server.connect()
        ch = self.connection.channel()
        if self.cfg.declare_queue is not None:
            ch.queue_declare(self.cfg.declare_queue, durable=True)
        elif self.cfg.exchange:
            ch.exchange_declare(self.cfg.exchange, passive=True)  # a missing exchange is one clear line, now
        # Confirms are taken asynchronously from the channel under the BlockingChannel (pika's
        # BlockingChannel.confirm_delivery makes each basic_publish wait for its own confirm: one
        # disk sync per message, ~300 messages/s). A batch is published at once and its confirms
        # are awaited together, so the broker syncs the batch once.
        impl = ch._impl
        ready: list[bool] = []
        impl.confirm_delivery(ack_nack_callback=self._on_confirm, callback=lambda _frame: ready.append(True))
        impl.add_on_return_callback(self._on_return)
        deadline = self.clock() + self.cfg.server.timeout_s
        while not ready:
            if self.clock() > deadline:
                raise TimeoutError(f"no answer to confirm.select within {self.cfg.server.timeout_s:g} s")
            self.connection.process_data_events(time_limit=0.05)
        self.channel = ch
        self.impl = impl
        self.seq = 0  # the channel's publish sequence: delivery tags of the confirms
        self.outstanding = {}
        self.outcome = {}
        self.props = pika.BasicProperties  # bound once: built per message below

    def _on_confirm(self, frame: Any) -> None:
        m = frame.method
        verdict = "ack" if m.NAME == "Basic.Ack" else "nack"
        tags = [t for t in self.outstanding if t <= m.delivery_tag] if m.multiple else [m.delivery_tag]
        for t in tags:
            if t in self.outstanding:
                self.outstanding.pop(t)
                self.outcome.setdefault(t, verdict)  # a return came first: it stays a return

    def _on_return(self, _channel: Any, method: Any, _props: Any, body: bytes) -> None:
        # a basic.return precedes the confirm of the same message; matched by routing key and body
        for t, (rk, b) in self.outstanding.items():
            if rk == method.routing_key and b == body and t not in self.outcome:
                self.outcome[t] = "return"
                return

    def _drop_connection(self, graceful: bool = True) -> None:
        old, self.connection, self.channel, self.impl = self.connection, None, None, None
        self.outstanding, self.outcome = {}, {}
        if old is not None:
            close_connection(old, graceful)

    def process(self, tup: Any) -> None:
        try:
            msg = build_message(self.cfg, self.fields.as_dict(tup))
        except ValueError as e:
            self._bad(tup, str(e))
            return
        self.loop.add((tup, msg))

    def heron_busy(self) -> bool:
        """Inputs are batched or published and not yet confirmed (an in-process run keeps polling)."""
        return self.loop.busy() or bool(self.outstanding)

    def heron_poll(self) -> None:
        if not self.loop.poll() or self.connection is None:
            return
        now = self.clock()
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + 1.0
            try:
                self.connection.process_data_events(time_limit=0)  # heartbeats while idle
            except Exception as e:
                self._on_error(e, now)

    def _publish(self, batch: list[tuple[Any, tuple[str, bytes, str | None]]]) -> list[int]:
        """Publishes the batch and waits for its confirms; the delivery tags, in order."""
        if self.connection is None:
            self._connect()
        tags: list[int] = []
        for _tup, (rk, body, mid) in batch:
            props = self.props(delivery_mode=2 if self.cfg.persistent else 1, message_id=mid,
                               content_type="application/octet-stream")
            self.seq += 1
            self.outstanding[self.seq] = (rk, body)
            self.impl.basic_publish(self.cfg.exchange, rk, body, props, mandatory=self.cfg.mandatory)
            tags.append(self.seq)
        deadline = self.clock() + self.cfg.server.timeout_s
        while self.outstanding:
            if self.clock() > deadline:
                raise TimeoutError(f"{len(self.outstanding)} publisher confirms not received within "
                                   f"{self.cfg.server.timeout_s:g} s")
            self.connection.process_data_events(time_limit=0.05)
        return tags

    def _confirmed(self, batch: list[tuple[Any, tuple[str, bytes, str | None]]], tags: list[int]) -> None:
        for (tup, (rk, _body, _mid)), tag in zip(batch, tags, strict=True):
            verdict = self.outcome.pop(tag, "nack")
            if verdict == "ack":
                self.counts["published"] += 1
                self.ack(tup)
            elif verdict == "return":
                self.counts["returned"] += 1
                self._bad(tup, f"the broker returned it unroutable (exchange '{self.cfg.exchange}', routing key "
                               f"'{rk}')")
            else:
                self.counts["nacked"] += 1
                self._bad(tup, "the broker nacked it (basic.nack)")

    def _failed(self, batch: list[tuple[Any, tuple[str, bytes, str | None]]], e: Exception, now: float) -> None:
        for tup, _msg in batch:
            self.counts["failed"] += 1
            self.fail(tup)  # the spout replays it
        self._on_error(e, now)

    def _recovered(self) -> None:
        self.log(f"{self.where}: rabbitmq server {self.address} reachable again")

    def _on_error(self, e: Exception, now: float) -> None:
        on_connection_error(self, e, now, exchange=self.cfg.exchange)

    def _bad(self, tup: Any, why: str) -> None:
        self.counts["bad-inputs"] += 1
        line = bad_input_line(self.where, str(tup.id), tup, why)
        if self.throttle.should_log(line):
            self.log(line, "error")
        self.fail(tup)

    def cleanup(self) -> None:
        self.loop.drain()  # a graceful stop publishes what is buffered
        self._drop_connection()
