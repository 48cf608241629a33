"""Kafka for the Streamlet API: ``KafkaSource`` for ``Builder.new_source`` and ``KafkaSink``
for ``Streamlet.to_sink``, with the KafkaSpout's and KafkaBolt's ``kafka.*`` options.

A Streamlet source emits without message ids (the Streamlet API has no acking), so the
source's delivery is NO_GUARANTEE (periodic commits of what it handed out) or AT_MOST_ONCE;
effectively once (``topology.reliability.mode`` EFFECTIVELY_ONCE) its positions are in the
source's state and sought after a restore, exactly as the KafkaSpout's. The source is the
KafkaSpout itself, driven by the Generator: partitions, first-poll strategies, refresh,
deserializers and metrics are the spout's.

A Streamlet sink is acked when ``put`` returns, so the sink cannot hold an element's tuple
until the broker confirmed it. It keeps each record until its delivery report instead: a
producer that can no longer deliver (a fatal error, or a record timed out: the idempotent
producer loops silently on a broker that lost its state, inflight.py) is replaced, as the
KafkaBolt's is, and every record still waiting is produced again through the new one (at
least once: a record in flight may land twice). A record the broker refuses (too large, a
topic it will not create) is counted and logged, not retried. It flushes on cleanup. For acks
that follow the broker's confirmations use the KafkaBolt.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from heron_py.api.streamlet.context import Context
from heron_py.api.streamlet.generator import Generator
from heron_py.api.streamlet.sink import Sink
from heron_py.common.config import MODE, Mode, effectively_once
from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.kafka.bolt import BACKSTOP_GRACE_S
from heron_py.connectors.kafka.config import ProcessingGuarantee, bolt_config, spout_config
from heron_py.connectors.kafka.inflight import InFlight, rebuild_after_poll, rebuild_reason
from heron_py.connectors.kafka.spout import POSITIONS_KEY, KafkaSpout
from heron_py.connectors.kafka.translators import serializer, translator


class _Collector:
    """The KafkaSpout's delegate inside a source: emitted values go to the source's queue."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger
        self.queue: deque[Any] = deque()

    def emit(self, tup: Any, stream: str, anchors: Any, direct_task: int | None, need_task_ids: bool,
             tup_id: Any) -> list[int] | None:
        self.queue.append(tup[0] if len(tup) == 1 else tuple(tup))
        return None

    def ack(self, tup: Any) -> None:
        """Not used: a source has no input."""

    def fail(self, tup: Any) -> None:
        """Not used: a source has no input."""

    def log(self, message: str, level: Any = None) -> None:
        lvl = {"trace": logging.DEBUG, "debug": logging.DEBUG, "warn": logging.WARNING,
               "error": logging.ERROR}.get(str(level), logging.INFO)
        self.logger.log(lvl, message)


class KafkaSource(Generator):
    """Each element is a record's value (decoded by ``kafka.value.deserializer``); a
    ``kafka.record.translator`` with several fields makes each element a tuple of them."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = {"kafka.record.translator": "value", **config}
        where = "kafka source"
        # checked at build: a bad option fails the submit, not the task
        cfg = spout_config(self.config, where, "heron-py")
        translator(where, cfg.translator, cfg.topics)
        if cfg.guarantee is ProcessingGuarantee.AT_LEAST_ONCE and "kafka.processing.guarantee" in config:
            raise ConnectorConfigError(f"{where}: config kafka.processing.guarantee: expected NO_GUARANTEE or "
                                       f"AT_MOST_ONCE (a Streamlet source has no acking; use the KafkaSpout, or "
                                       f"EFFECTIVELY_ONCE mode), found 'AT_LEAST_ONCE'")

    def setup(self, context: Context) -> None:
        top = getattr(context, "_top_context", None)
        if top is None:  # heron-py's ContextImpl carries the task's TopologyContext
            raise RuntimeError("KafkaSource needs heron-py's streamlet runtime (a Context with the task's "
                               "TopologyContext)")
        conf = {**top.get_cluster_config(), **self.config}
        eo = effectively_once(conf)
        if not eo:
            # no message ids reach the spout: it must not wait for acks
            conf[MODE.name] = Mode.ATMOST_ONCE.value
            conf.setdefault("kafka.processing.guarantee", "NO_GUARANTEE")
        self._collector = _Collector(self.logger)
        self._spout = KafkaSpout(self._collector)
        state = context.get_state()
        if eo and state is not None:
            self._spout.init_state(state)
        self._spout.initialize(conf, top)
        if eo and state is not None:
            # the live positions dict: each checkpoint pickles it as it is at that moment (a
            # Generator has no pre_save); a restore reads it back through init_state
            state.put(POSITIONS_KEY, self._spout.positions)

    def get(self) -> Any:
        q = self._collector.queue
        if not q:
            self._spout.next_tuple()
        return q.popleft() if q else None


class KafkaSink(Sink):
    """Produces each element as a record's value to ``kafka.topic``; ``key`` (a function of the
    element) gives its key. Options as the KafkaBolt's (``kafka.producer.*``, serializers)."""

    def __init__(self, config: dict[str, Any], key: Callable[[Any], Any] | None = None) -> None:
        self.config = dict(config)
        self.key = key
        cfg = bolt_config(self.config, "kafka sink")
        if cfg.topic is None:
            raise ConnectorConfigError(f"kafka sink: config kafka.topic: expected a topic name (a sink's element "
                                       f"has no fields for kafka.topic.field), found {cfg.topic_field!r}")

    def setup(self, context: Context) -> None:
        self.where = f"kafka sink task {context.get_task_id()}"
        self.cfg = bolt_config(self.config, self.where)
        self.key_ser = serializer(self.where, "kafka.key.serializer", self.cfg.key_serializer)
        self.value_ser = serializer(self.where, "kafka.value.serializer", self.cfg.value_serializer)
        self.errors = 0
        self._last_error = ("", 0.0)
        self.clock: Callable[[], float] = time.monotonic
        self.inflight = InFlight()  # (key, value) of each record until its delivery report
        self.backstop_s = self.cfg.message_timeout_ms / 1000.0 + BACKSTOP_GRACE_S
        # records whose report said the producer is wedged: produced again after the rebuild
        self._again: list[tuple[bytes | None, bytes | None]] = []
        self.rebuild_why: str | None = None  # set in callbacks, acted on after poll returns
        self.rebuilds = 0
        self.producer = self._new_producer()

    def _new_producer(self) -> Any:
        from confluent_kafka import Producer
        return Producer({**self.cfg.client_config(), "error_cb": self._on_error})

    def put(self, element: Any) -> None:
        key = self.key_ser(self.key(element)) if self.key is not None else None
        self._produce(key, self.value_ser(element))
        self._poll(0)

    def _produce(self, key: bytes | None, value: bytes | None) -> None:
        assert self.cfg.topic is not None  # checked in __init__
        cb = partial(self._delivered, self.inflight.add((key, value), self.clock()))
        while True:
            try:
                self.producer.produce(self.cfg.topic, value=value, key=key, on_delivery=cb)
                return
            except BufferError:  # the client's queue is full: wait for deliveries
                self.producer.poll(0.05)

    def _delivered(self, ident: int, err: Any, _msg: Any) -> None:
        record = self.inflight.pop(ident)
        if err is None or record is None:  # None: taken at a rebuild (its purge reports it)
            return
        why = rebuild_reason(err.code(), err.fatal(), err.str())
        if why is not None:
            if self.rebuild_why is None:
                self.rebuild_why = why
            self._again.append(record)
            return
        self.errors += 1
        self._on_error(err)

    def _poll(self, timeout_s: float) -> None:
        self.producer.poll(timeout_s)
        why = rebuild_after_poll(self.rebuild_why, self.inflight, self.clock(), self.backstop_s)
        if why is not None:
            self._rebuild(why)

    def _rebuild(self, why: str) -> None:
        """Swaps in a new producer and produces every record still waiting through it. The old
        one's queue is purged; its purge reports find their records taken already."""
        old, self.producer = self.producer, self._new_producer()
        self.rebuild_why = None
        self.rebuilds += 1
        waiting, self._again = self._again + self.inflight.take_all(), []
        self.logger.warning(f"{self.where}: rebuilding the Kafka producer for {self.cfg.bootstrap_servers} "
                            f"(rebuild {self.rebuilds}): {why}; producing the {len(waiting)} records still "
                            f"waiting for delivery again")
        old.purge()
        old.flush(0)
        for key, value in waiting:
            self._produce(key, value)

    def _on_error(self, err: Any) -> None:
        if err.fatal() and self.rebuild_why is None:  # error_cb runs inside poll(): acted on after
            self.rebuild_why = f"fatal producer error: {err.str()}"
        line = f"{self.where}: kafka error on {self.cfg.bootstrap_servers}: {err}"
        now = time.monotonic()
        if line != self._last_error[0] or now - self._last_error[1] >= 10:
            self._last_error = (line, now)
            self.logger.warning(line)

    @property
    def logger(self) -> logging.Logger:
        return logging.getLogger("heron_py.streamlet.KafkaSink")

    def cleanup(self) -> None:
        self.producer.flush(10)
