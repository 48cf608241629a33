"""The Kafka connectors' options, read once from a component's config dict into frozen
dataclasses; a bad value is one ConnectorConfigError line (what, where, expected, found)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from heron_py.common.config import TIMEOUT, ConfigError
from heron_py.connectors.base import RetryPolicy
from heron_py.connectors.common import config_error, opt_bool, opt_int, retry_policy

CONSUMER_PREFIX = "kafka.consumer."
PRODUCER_PREFIX = "kafka.producer."


class FirstPollOffsetStrategy(Enum):
    EARLIEST = "EARLIEST"
    LATEST = "LATEST"
    UNCOMMITTED_EARLIEST = "UNCOMMITTED_EARLIEST"
    UNCOMMITTED_LATEST = "UNCOMMITTED_LATEST"


class ProcessingGuarantee(Enum):
    AT_LEAST_ONCE = "AT_LEAST_ONCE"
    AT_MOST_ONCE = "AT_MOST_ONCE"
    NO_GUARANTEE = "NO_GUARANTEE"


def _enum(conf: dict[str, Any], where: str, key: str, cls: Any, default: Any) -> Any:
    v = conf.get(key, default)
    if isinstance(v, cls):
        return v
    try:
        return cls(str(v).upper())
    except ValueError:
        raise config_error(where, key, f"one of {[m.value for m in cls]}", v) from None


def _servers(conf: dict[str, Any], where: str) -> str:
    v = conf.get("kafka.bootstrap.servers")
    if isinstance(v, (list, tuple)):
        v = ",".join(str(x) for x in v)
    if not isinstance(v, str) or not v.strip():
        raise config_error(where, "kafka.bootstrap.servers", "'host:port[,host:port...]'", v)
    return v


def _passthrough(conf: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in conf.items() if k.startswith(prefix)}


FETCH_QUEUE_BACKOFF_MS = 10  # the spout's default for librdkafka's fetch.queue.backoff.ms (client_config)


@dataclass(frozen=True)
class SpoutConfig:
    bootstrap_servers: str
    topics: tuple[str, ...]
    topic_pattern: str | None
    group_id: str
    first_poll: FirstPollOffsetStrategy
    guarantee: ProcessingGuarantee
    max_uncommitted: int
    retry: RetryPolicy
    commit_period_s: float
    refresh_period_s: float
    poll_timeout_s: float
    max_poll_records: int
    translator: Any  # a name (str), or a RecordTranslator object (Flux passes built ones)
    key_deserializer: str
    value_deserializer: str
    consumer: tuple[tuple[str, Any], ...]
    # at least once: each record its own tuple tree (True) or each emitted batch of a
    # partition's records one tree under one message id (False: offsets.py, ``run_id``)
    ack_per_record: bool = False

    def client_config(self) -> dict[str, Any]:
        # auto commit off: commits follow acks (or checkpoints), never the client's timer.
        # fetch.queue.backoff.ms (librdkafka >= 2.4; confluent-kafka >= 2.6 bundles it): once a
        # partition's prefetch queue passes queued.min.messages, librdkafka waits this long
        # before fetching again. Its default, 1000 ms, stalls any consumer that spends time on
        # each batch: the queue fills, is drained in ~0.2 s, then sits empty for the rest of
        # the second (measured on Tansu with 1 ms of work per 500-record consume: 119,080
        # records/s at 1000 ms, 416,273 at 10 ms). A kafka.consumer.* setting overrides it.
        return {"bootstrap.servers": self.bootstrap_servers, "group.id": self.group_id,
                "enable.auto.commit": False, "enable.auto.offset.store": False,
                "enable.partition.eof": False, "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
                **dict(self.consumer)}


def spout_config(conf: dict[str, Any], where: str, default_group: str) -> SpoutConfig:
    topics_v = conf.get("kafka.topics", conf.get("kafka.topic"))
    pattern = conf.get("kafka.topic.pattern")
    if isinstance(topics_v, str):
        topics = tuple(t.strip() for t in topics_v.split(",") if t.strip())
    elif isinstance(topics_v, (list, tuple)) and all(isinstance(t, str) and t for t in topics_v):
        topics = tuple(topics_v)
    elif topics_v is None:
        topics = ()
    else:
        raise config_error(where, "kafka.topics", "a list of topic names", topics_v)
    if bool(topics) == bool(pattern):
        raise config_error(where, "kafka.topics / kafka.topic.pattern", "exactly one of them",
                           {"kafka.topics": topics_v, "kafka.topic.pattern": pattern})
    if pattern is not None:
        try:
            re.compile(str(pattern))
        except re.error as e:
            raise config_error(where, "kafka.topic.pattern", f"a regular expression ({e})", pattern) from None
    group = conf.get("kafka.group.id", default_group)
    if not isinstance(group, str) or not group:
        raise config_error(where, "kafka.group.id", "a non-empty string", group)
    retry = retry_policy(conf, where, "kafka")
    return SpoutConfig(
        bootstrap_servers=_servers(conf, where), topics=topics,
        topic_pattern=None if pattern is None else str(pattern), group_id=group,
        first_poll=_enum(conf, where, "kafka.first.poll.offset.strategy", FirstPollOffsetStrategy,
                         "UNCOMMITTED_EARLIEST"),
        guarantee=_enum(conf, where, "kafka.processing.guarantee", ProcessingGuarantee, "AT_LEAST_ONCE"),
        max_uncommitted=opt_int(conf, where, "kafka.max.uncommitted.offsets", 10_000_000, 1),
        retry=retry,
        commit_period_s=opt_int(conf, where, "kafka.offset.commit.period.ms", 30_000, 1) / 1000.0,
        refresh_period_s=opt_int(conf, where, "kafka.partition.refresh.period.ms", 2_000, 1) / 1000.0,
        poll_timeout_s=opt_int(conf, where, "kafka.poll.timeout.ms", 20, 0) / 1000.0,
        max_poll_records=opt_int(conf, where, "kafka.max.poll.records", 500, 1),
        translator=conf.get("kafka.record.translator", "default"),
        key_deserializer=str(conf.get("kafka.key.deserializer", "string")),
        value_deserializer=str(conf.get("kafka.value.deserializer", "string")),
        consumer=tuple(sorted(_passthrough(conf, CONSUMER_PREFIX).items())),
        ack_per_record=opt_bool(conf, where, "kafka.ack.per.record", False),
    )


@dataclass(frozen=True)
class BoltConfig:
    bootstrap_servers: str
    topic: str | None
    topic_field: str | None
    key_field: str
    message_field: str
    fire_and_forget: bool
    key_serializer: str
    value_serializer: str
    producer: tuple[tuple[str, Any], ...]
    # librdkafka's message.timeout.ms: a record not delivered by then is reported failed (and
    # the bolt rebuilds its producer: inflight.py says why)
    message_timeout_ms: int = 30_000

    def client_config(self) -> dict[str, Any]:
        # the idempotent producer: a retried send is never written twice
        return {"bootstrap.servers": self.bootstrap_servers, "enable.idempotence": True,
                "linger.ms": 5, **dict(self.producer), "message.timeout.ms": self.message_timeout_ms}


_TIMEOUT_KEYS = ("message.timeout.ms", "delivery.timeout.ms")  # librdkafka's name and its alias


def _message_timeout_ms(conf: dict[str, Any], where: str) -> int:
    """``kafka.producer.message.timeout.ms`` (or its alias ``delivery.timeout.ms``) if set; else
    the topology's message timeout: librdkafka's own default (300 s) would keep a wedged
    producer's records, and the inputs' replays, waiting long after their tuple trees timed out."""
    for k in _TIMEOUT_KEYS:
        if PRODUCER_PREFIX + k in conf:
            return opt_int(conf, where, PRODUCER_PREFIX + k, 30_000, 1)
    try:
        secs = float(TIMEOUT.parse(conf))  # the engine's key: its default, its parse
    except ConfigError:
        secs = float(TIMEOUT.default)  # the engine refuses a bad value with its own line before any task starts
    return max(1, int(secs * 1000))


def bolt_config(conf: dict[str, Any], where: str) -> BoltConfig:
    topic, field = conf.get("kafka.topic"), conf.get("kafka.topic.field")
    if not topic and not field:
        # both: the field's topic, the default topic when the field is missing or empty
        # (Storm's FieldNameBasedTopicSelector(fieldName, defaultTopic))
        raise config_error(where, "kafka.topic / kafka.topic.field", "at least one of them",
                           {"kafka.topic": topic, "kafka.topic.field": field})
    return BoltConfig(
        bootstrap_servers=_servers(conf, where), topic=None if not topic else str(topic),
        topic_field=None if not field else str(field),
        key_field=str(conf.get("kafka.key.field", "key")),
        message_field=str(conf.get("kafka.message.field", "message")),
        fire_and_forget=opt_bool(conf, where, "kafka.fire.and.forget", False),
        key_serializer=str(conf.get("kafka.key.serializer", "string")),
        value_serializer=str(conf.get("kafka.value.serializer", "string")),
        producer=tuple(sorted((k, v) for k, v in _passthrough(conf, PRODUCER_PREFIX).items()
                              if k not in _TIMEOUT_KEYS)),
        message_timeout_ms=_message_timeout_ms(conf, where),
    )
