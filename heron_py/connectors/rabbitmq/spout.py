"""RabbitMQSpout: a queue consumed with manual acks, at least once.

The broker delivers at most ``rabbitmq.prefetch`` unacknowledged messages (basic.qos; by default
the topology's ``topology.max.spout.pending``), so the spout's pending count and the broker's
agree. A message is basic.acked when its tuple tree is acked; when it fails it is
basic.nacked with requeue after a backoff (``rabbitmq.retry.initial.delay.ms`` doubling up to
``rabbitmq.retry.max.delay.ms``, from ``heron_py.connectors.base.ReplayableSource``), and the
broker delivers it again; after ``rabbitmq.max.retries`` fails (default: never) it is nacked
without requeue (dead-lettered if the queue has a dead-letter exchange).

A delivery tag belongs to its channel: when the connection is lost the broker requeues every
unacknowledged message by itself, so acks and fails of tuples from an earlier connection are
dropped (the messages come again: at least once). pika's BlockingConnection is not
thread-safe; the spout uses it only from the task's thread (next_tuple, ack and fail).

A body that is not UTF-8 (with ``rabbitmq.decode.utf8``, the default) is malformed: not
emitted, logged once with its message id and delivery tag, counted in the metric ``malformed``
and rejected without requeue, so it never stops the topology. A broker that is down, refuses
the credentials or lacks the queue is one line in the log (repeated at most every 10 s),
retried with exponential backoff and counted in the metric ``connection-errors``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from heron_py.api.metrics import IMetric
from heron_py.api.spout.spout import Spout
from heron_py.connectors.base import ReplayableSource
from heron_py.connectors.common import LogThrottle, Reconnect, component_where, source_acking
from heron_py.connectors.rabbitmq.config import SpoutConfig, close_connection, spout_config
from heron_py.connectors.rabbitmq.errors import on_connection_error

Key = tuple[int, int]  # (connection generation, delivery tag): the ReplayableSource message id


def decode_body(body: bytes, decode: bool) -> tuple[Any, str]:
    """The body to emit (str, or bytes without decoding), or None and why it is malformed."""
    if not decode:
        return body, ""
    try:
        return body.decode("utf-8"), ""
    except UnicodeDecodeError as e:
        return None, f"its body is not UTF-8 ({e.reason} at byte {e.start})"


def message_id(props: Any, generation: int, tag: int) -> str:
    """The publisher's message_id, else one made of the delivery (unique, not stable across
    redeliveries)."""
    mid = getattr(props, "message_id", None)
    return str(mid) if mid else f"delivery-{generation}-{tag}"


class _Metrics(IMetric):
    def __init__(self, spout: RabbitMQSpout) -> None:
        self.spout = spout

    def get_value_and_reset(self) -> dict[str, float]:
        return self.spout.metrics_snapshot()


class RabbitMQSpout(Spout):
    """Configured by the component's config (``rabbitmq.*``, see docs/connectors/rabbitmq.md).
    Emits ``id`` (the message_id property, else ``delivery-<connection>-<tag>``) and ``body``."""

    outputs = ["id", "body"]
    clock: Callable[[], float] = time.monotonic
    # the host stops calling next_tuple while max pending is reached; heron_poll keeps the
    # connection's heartbeats going then (pika answers them only inside process_data_events)
    heron_poll_interval_s = 1.0

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.context = context
        self.where = component_where("rabbitmq spout", context)
        self.cfg: SpoutConfig = spout_config(config, self.where)
        from heron_py.common.config import MODE, effectively_once

        self.tracked = source_acking(config)
        if effectively_once(config):
            self.log(f"{self.where}: a RabbitMQ queue cannot be read again from a checkpoint's position; in "
                     f"EFFECTIVELY_ONCE mode messages are acknowledged when emitted (at most once)", "warn")
        elif not self.tracked:
            self.log(f"{self.where}: the topology has no acking (topology.reliability.mode "
                     f"{MODE.parse(config)}); messages are acknowledged when "
                     f"emitted (at most once); use ATLEAST_ONCE for at least once", "warn")
        self.address = self.cfg.server.address()
        self.source: ReplayableSource[int] = ReplayableSource(retry=self.cfg.retry,
                                                              max_uncommitted=self.cfg.prefetch,
                                                              on_give_up=self._gave_up)
        self.connection: Any = None
        self.channel: Any = None
        self.generation = 0
        self.deliveries: deque[tuple[Any, Any, bytes]] = deque()  # (method, properties, body) to emit
        self.active = True
        self.consuming = False
        self.conn = Reconnect(self.cfg.reconnect)
        self.throttle = LogThrottle(self.clock)
        self.counts = {"records": 0, "malformed": 0, "redelivered": 0, "connection-errors": 0, "reconnects": 0,
                       "nacked": 0, "stalls": 0}
        self._lag_asked: float | None = None  # when the lag's queue.declare was sent, until answered
        self._stalled = False  # that answer is overdue
        self._next_commit = self.clock() + 1.0
        self._last_loop = self.clock()
        self.lag: int | None = None
        context.register_metric("rabbitmq", _Metrics(self), 10)
        self.log(f"{self.where}: consuming queue '{self.cfg.queue}' of {self.address} with prefetch "
                 f"{self.cfg.prefetch}")

    # --- connection ------------------------------------------------------------------------------
    def _connect(self) -> None:
        self.generation += 1
        self.source.assign(self.generation, 1)  # delivery tags start at 1 on every channel
        self.connection = self.cfg.server.connect()
        ch = self.connection.channel()
        if self.cfg.declare:
            ch.queue_declare(self.cfg.queue, durable=self.cfg.durable)
        else:
            ch.queue_declare(self.cfg.queue, passive=True)  # a missing queue is one clear line, now
        ch.basic_qos(prefetch_count=self.cfg.prefetch)
        self.channel = ch
        self.consuming = False
        self._set_consuming()

    def _set_consuming(self) -> None:
        """Deactivated: the consumer is cancelled, so the broker keeps new messages for others."""
        if self.channel is None:
            return
        if self.active and not self.consuming:
            self.channel.basic_consume(self.cfg.queue, self._on_message, auto_ack=False)
            self.consuming = True
        elif not self.active and self.consuming:
            for tag in list(self.channel.consumer_tags):
                self.channel.basic_cancel(tag)
            self.consuming = False

    def _on_message(self, channel: Any, method: Any, properties: Any, body: bytes) -> None:
        self.deliveries.append((method, properties, body))

    def _drop_connection(self, graceful: bool = True) -> None:
        """The broker requeues what this connection held: forget its deliveries and ids."""
        old, self.connection, self.channel = self.connection, None, None
        self.source.revoke(self.generation)
        self.deliveries.clear()
        self.consuming = False
        self._lag_asked, self._stalled = None, False
        if old is not None:
            close_connection(old, graceful)

    # --- lifecycle -------------------------------------------------------------------------------
    def activate(self) -> None:
        self.active = True

    def deactivate(self) -> None:
        self.active = False

    def close(self) -> None:
        self._drop_connection()

    # --- the loop --------------------------------------------------------------------------------
    def heron_poll(self) -> None:
        now = self.clock()
        if self.connection is None or now - self._last_loop < 1.0:
            return
        try:
            self.connection.process_data_events(time_limit=0)  # deliveries are kept for next_tuple
        except Exception as e:
            self._on_error(e, now)

    def next_tuple(self) -> None:
        now = self.clock()
        self._last_loop = now
        if self.connection is None and not self.conn.ready(now):
            time.sleep(min(0.01, max(0.0, self.conn.next_try - now)))
            return
        try:
            if self.connection is None:
                self._connect()
            self._set_consuming()
            for key, _rec in self.source.due_retries(now):
                self._nack(key, requeue=True)
            if now >= self._next_commit:
                self.source.committed(self.source.commits())  # keeps may_emit's count to what is in flight
                self._next_commit = now + 1.0
                self._ask_lag(now)
            if not self.deliveries:
                # heartbeats and deliveries; blocks at most 10 ms when there is nothing to do
                self.connection.process_data_events(time_limit=0.01 if self.active else 0)
            for _ in range(len(self.deliveries)):
                self._emit(*self.deliveries.popleft())
        except Exception as e:
            self._on_error(e, now)
            return
        if self.conn.ok():
            self.counts["reconnects"] += 1
            self.log(f"{self.where}: rabbitmq server {self.address} reachable again")

    def _ask_lag(self, now: float) -> None:
        """The lag metric: messages ready in the queue, the count a passive queue.declare
        answers. Sent on the channel under the BlockingChannel and not waited for (the answer
        comes in a later process_data_events): BlockingChannel.queue_declare waits with no
        timeout, so a frozen broker held the task's thread until the heartbeat check closed the
        connection (65 s or more with the default heartbeat). An answer overdue past
        rabbitmq.timeout.ms is one line and the metric ``stalls``; the spout keeps its
        connection (a short freeze then costs no redelivery) until the heartbeat check ends it."""
        asked = self._lag_asked
        if asked is not None:
            if not self._stalled and now - asked > self.cfg.server.timeout_s:
                self._stalled = True
                self.counts["stalls"] += 1
                line = (f"{self.where}: rabbitmq server {self.address} has not answered for "
                        f"{self.cfg.server.timeout_s:g} s (a passive queue.declare of queue '{self.cfg.queue}'); "
                        f"waiting for it, the heartbeat check (rabbitmq.heartbeat.secs "
                        f"{self.cfg.server.heartbeat_s}) closes a dead connection")
                if self.throttle.should_log(line):
                    self.log(line, "warn")
            return
        generation = self.generation

        def answered(frame: Any) -> None:
            if generation == self.generation:  # not an answer on a connection since dropped
                self.lag = int(frame.method.message_count)
                self._lag_asked, self._stalled = None, False

        self._lag_asked = now
        self.channel._impl.queue_declare(self.cfg.queue, passive=True, callback=answered)

    def _emit(self, method: Any, props: Any, body: bytes) -> None:
        tag = int(method.delivery_tag)
        mid = message_id(props, self.generation, tag)
        self.counts["records"] += 1
        if method.redelivered:
            self.counts["redelivered"] += 1
        value, why = decode_body(body, self.cfg.decode)
        if value is None:
            self.counts["malformed"] += 1
            self.log(f"{self.where}: message {mid} (delivery tag {tag}) of queue '{self.cfg.queue}' is malformed: "
                     f"{why}; rejected without requeue (not emitted)", "error")
            self.channel.basic_nack(tag, requeue=False)
            return
        if not self.tracked:
            self.emit([mid, value])
            self.channel.basic_ack(tag)
            return
        key = self.source.emitted(self.generation, tag, (mid, value))
        if key is not None:
            self.emit([mid, value], tup_id=key)

    def ack(self, tup_id: Any) -> None:
        key: Key = (int(tup_id[0]), int(tup_id[1]))
        if not self.source.ack(key) or key[0] != self.generation or self.channel is None:
            return  # from an earlier connection: the broker requeued it and delivers it again
        try:
            self.channel.basic_ack(key[1])
        except Exception as e:
            self._on_error(e, self.clock())

    def fail(self, tup_id: Any) -> None:
        key: Key = (int(tup_id[0]), int(tup_id[1]))
        # a nack with requeue once the backoff has passed (next_tuple); past rabbitmq.max.retries: _gave_up
        self.source.fail(key, self.clock())

    def _gave_up(self, generation: int, tag: int, failures: int, record: Any) -> None:
        # the base forgot it: rejected without requeue
        self.log(f"{self.where}: message {record[0]} of queue '{self.cfg.queue}' failed {failures} times; "
                 f"rabbitmq.max.retries reached, rejecting it without requeue", "error")
        self._nack((generation, tag), requeue=False, forgotten=True)

    def _nack(self, key: Key, requeue: bool, forgotten: bool = False) -> None:
        if not forgotten:
            p = self.source.pending.pop(key, None)
            t = self.source.trackers.get(key[0])
            if p is None or t is None:
                return
            t.add_acked(key[1])  # done here: the broker owns the message again
        if key[0] != self.generation or self.channel is None:
            return
        self.counts["nacked"] += 1
        try:
            self.channel.basic_nack(key[1], requeue=requeue)
        except Exception as e:
            self._on_error(e, self.clock())

    # --- errors and metrics ----------------------------------------------------------------------
    def _on_error(self, e: Exception, now: float) -> None:
        on_connection_error(self, e, now, queue=self.cfg.queue)

    def metrics_snapshot(self) -> dict[str, float]:
        out: dict[str, float] = {k: float(v) for k, v in self.counts.items()}
        for k in self.counts:
            self.counts[k] = 0
        out.update({k: float(v) for k, v in self.source.stats.take().items()})
        out["pending"] = float(len(self.source.pending))
        out["connected"] = 1.0 if self.connection is not None else 0.0
        if self.lag is not None:
            out["lag"] = float(self.lag)
        return out
