"""storm-kafka-client's classes in Flux files, unchanged, mapped to heron-py's Kafka connectors.

A Flux file builds a ``KafkaSpoutConfig$Builder`` (bootstrap servers and topics, then bean
properties and setters), wraps it in a ``KafkaSpoutConfig`` and hands that to a ``KafkaSpout``;
a ``KafkaBolt`` takes producer properties, a topic selector and a tuple mapper through its
``with*`` methods. Each Java object here is a small Python object that collects the ``kafka.*``
options of ``heron_py.connectors.kafka`` (docs/connectors/kafka.md); the spout and bolt makers
turn them into the component's config. Java client properties are translated: the ones the
connectors own (bootstrap servers, group id, (de)serializers) become ``kafka.*`` options, the
rest pass to librdkafka, which shares most of their names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from heron_py.api.component.component_spec import HeronComponentSpec
from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.kafka.bolt import KafkaBolt
from heron_py.connectors.kafka.spout import KafkaSpout
from heron_py.connectors.kafka.translators import RecordTranslator, TopicRouterTranslator, ValueRecordTranslator
from heron_py.flux.makers import Context, Maker, component_config, resolve_refs
from heron_py.flux.model import ObjectSpec

SPOUT_PKG = "org.apache.storm.kafka.spout."
BOLT_PKG = "org.apache.storm.kafka.bolt."

# Java consumer/producer properties the connectors own → their kafka.* option
_CONSUMER_OWN = {"bootstrap.servers": "kafka.bootstrap.servers", "group.id": "kafka.group.id",
                 "key.deserializer": "kafka.key.deserializer", "value.deserializer": "kafka.value.deserializer",
                 "max.poll.records": "kafka.max.poll.records"}
_PRODUCER_OWN = {"bootstrap.servers": "kafka.bootstrap.servers", "key.serializer": "kafka.key.serializer",
                 "value.serializer": "kafka.value.serializer"}
# Java producer settings librdkafka has no equivalent of (memory and blocking of the Java client)
_PRODUCER_JAVA_ONLY = {"buffer.memory", "max.block.ms"}
_TIME_UNITS_MS = {"NANOSECONDS": 1e-6, "MICROSECONDS": 1e-3, "MILLISECONDS": 1.0, "SECONDS": 1000.0,
                  "MINUTES": 60_000.0, "HOURS": 3_600_000.0, "DAYS": 86_400_000.0}


def consumer_option(key: str, value: Any) -> tuple[str, Any] | None:
    """One Java consumer property → (kafka.* option, value), or None to drop it."""
    if key == "enable.auto.commit":
        # commits follow acks or checkpoints; Storm turns an auto-commit spout into NO_GUARANTEE
        return ("kafka.processing.guarantee", "NO_GUARANTEE") if str(value).lower() == "true" else None
    return _CONSUMER_OWN.get(key, f"kafka.consumer.{key}"), value


def producer_option(key: str, value: Any) -> tuple[str, Any] | None:
    if key in _PRODUCER_JAVA_ONLY:
        return None
    return _PRODUCER_OWN.get(key, f"kafka.producer.{key}"), value


class JavaProperties(dict[str, Any]):
    """java.util.Properties / HashMap: ``put`` and ``setProperty`` fill it."""

    def put(self, key: str, value: Any) -> None:
        self[key] = value

    def setProperty(self, key: str, value: Any) -> None:
        self[key] = value


class TimeInterval:
    """KafkaSpoutRetryExponentialBackoff$TimeInterval(length, TimeUnit)."""

    def __init__(self, length: int, unit: str = "MILLISECONDS") -> None:
        if str(unit).upper() not in _TIME_UNITS_MS:
            raise ConnectorConfigError(f"TimeInterval: unit expected one of {list(_TIME_UNITS_MS)}, found {unit!r}")
        self.ms = int(length * _TIME_UNITS_MS[str(unit).upper()])


class RetryExponentialBackoff:
    """KafkaSpoutRetryExponentialBackoff(initialDelay, delayPeriod, maxRetries, maxDelay): the
    first retry waits initialDelay, then the delay doubles (heron-py's RetryPolicy), capped."""

    def __init__(self, initial: TimeInterval, _period: TimeInterval, max_retries: int, max_delay: TimeInterval) -> None:
        self.options = {"kafka.retry.initial.delay.ms": initial.ms, "kafka.max.retries": int(max_retries),
                        "kafka.retry.max.delay.ms": max_delay.ms}


class KafkaSpoutConfigBuilder:
    """KafkaSpoutConfig$Builder(bootstrapServers, topics...): setters and bean properties."""

    def __init__(self, bootstrap_servers: Any, *topics: Any) -> None:
        names: list[str] = []
        for t in topics:
            names.extend(t if isinstance(t, list) else [t])
        if not names or not all(isinstance(t, str) and t for t in names):
            raise ConnectorConfigError(f"KafkaSpoutConfig$Builder: constructorArgs expected [bootstrapServers, "
                                       f"[topics...]], found topics {list(topics)!r}")
        self.options: dict[str, Any] = {"kafka.bootstrap.servers": bootstrap_servers, "kafka.topics": names}

    # Storm's Builder setters (Flux calls setX for a property X)
    def setProp(self, key: Any, value: Any = None) -> KafkaSpoutConfigBuilder:
        items = key.items() if isinstance(key, dict) else [(key, value)]
        for k, v in items:
            opt = consumer_option(str(k), v)
            if opt is not None:
                self.options[opt[0]] = opt[1]
        return self

    def setGroupId(self, group: str) -> KafkaSpoutConfigBuilder:
        return self._set("kafka.group.id", group)

    def setFirstPollOffsetStrategy(self, s: Any) -> KafkaSpoutConfigBuilder:
        return self._set("kafka.first.poll.offset.strategy", str(s).rsplit(".", 1)[-1])

    def setProcessingGuarantee(self, g: Any) -> KafkaSpoutConfigBuilder:
        # Storm's enum is KafkaSpoutConfig.ProcessingGuarantee: AT_LEAST_ONCE, AT_MOST_ONCE, NO_GUARANTEE
        return self._set("kafka.processing.guarantee", str(g).rsplit(".", 1)[-1])

    def setRecordTranslator(self, t: Any) -> KafkaSpoutConfigBuilder:
        if not isinstance(t, RecordTranslator):
            raise ConnectorConfigError(f"KafkaSpoutConfig$Builder: setRecordTranslator expected a record translator "
                                       f"component (ref), found {t!r}; Java lambdas (Func, Fields) cannot run here")
        return self._set("kafka.record.translator", t)

    def setRetry(self, r: RetryExponentialBackoff) -> KafkaSpoutConfigBuilder:
        self.options.update(r.options)
        return self

    def setOffsetCommitPeriodMs(self, ms: int) -> KafkaSpoutConfigBuilder:
        return self._set("kafka.offset.commit.period.ms", ms)

    def setMaxUncommittedOffsets(self, n: int) -> KafkaSpoutConfigBuilder:
        return self._set("kafka.max.uncommitted.offsets", n)

    def setPollTimeoutMs(self, ms: int) -> KafkaSpoutConfigBuilder:
        return self._set("kafka.poll.timeout.ms", ms)

    def setPartitionRefreshPeriodMs(self, ms: int) -> KafkaSpoutConfigBuilder:
        return self._set("kafka.partition.refresh.period.ms", ms)

    def setEmitNullTuples(self, _on: bool) -> KafkaSpoutConfigBuilder:
        # heron-py emits records with a null value as Storm does with emitNullTuples true
        return self

    def setTupleTrackingEnforced(self, _on: bool) -> KafkaSpoutConfigBuilder:
        return self  # tracking follows the processing guarantee and the topology's reliability mode

    def _set(self, key: str, value: Any) -> KafkaSpoutConfigBuilder:
        self.options[key] = value
        return self


class KafkaSpoutConfig:
    """KafkaSpoutConfig(builder): the finished options."""

    def __init__(self, builder: KafkaSpoutConfigBuilder) -> None:
        if not isinstance(builder, KafkaSpoutConfigBuilder):
            raise ConnectorConfigError(f"KafkaSpoutConfig: constructorArgs expected [ref to a "
                                       f"KafkaSpoutConfig$Builder], found {builder!r}")
        self.options = dict(builder.options)


class DefaultTopicSelector:
    def __init__(self, topic: str) -> None:
        self.options = {"kafka.topic": topic}


class FieldNameBasedTopicSelector:
    def __init__(self, field: str, default_topic: str | None = None) -> None:
        self.options = {"kafka.topic.field": field, **({"kafka.topic": default_topic} if default_topic else {})}


class FieldNameBasedTupleToKafkaMapper:
    """Storm's mapper: fields "key" and "message" unless named."""

    def __init__(self, key_field: str = "key", message_field: str = "message") -> None:
        self.options = {"kafka.key.field": key_field, "kafka.message.field": message_field}


def _with_args(factory: Callable[..., Any]) -> Callable[[ObjectSpec, Context], Any]:
    """An object made from constructorArgs, then bean properties (setX or the attribute) and
    configMethods, as Flux does."""
    def make(obj: ObjectSpec, ctx: Context) -> Any:
        args = [resolve_refs(ctx, obj.where, a) for a in obj.constructor_args]
        try:
            inst = factory(*args)
            for name, value in obj.properties:
                value = resolve_refs(ctx, obj.where, value)
                setter = getattr(inst, "set" + name[:1].upper() + name[1:], None)
                if setter is None:
                    raise ConnectorConfigError(f"property '{name}' is not supported")
                setter(value)
            for m in obj.config_methods:
                method = getattr(inst, m.name, None)
                if method is None or m.name.startswith("_"):
                    raise ConnectorConfigError(f"configMethods '{m.name}' is not supported")
                method(*[resolve_refs(ctx, obj.where, a) for a in m.args])
        except ConnectorConfigError as e:
            raise ctx.err(obj.where, f"className '{obj.class_name}': {e}") from None
        except TypeError as e:
            raise ctx.err(obj.where, f"className '{obj.class_name}' could not be created with constructorArgs "
                                     f"{list(obj.constructor_args)!r} ({e})") from None
        return inst
    return make


def _refuse(why: str) -> Callable[[ObjectSpec, Context], Any]:
    def make(obj: ObjectSpec, ctx: Context) -> Any:
        raise ctx.err(obj.where, f"className '{obj.class_name}': {why}")
    return make


OBJECTS: dict[str, Callable[[ObjectSpec, Context], Any]] = {
    SPOUT_PKG + "KafkaSpoutConfig$Builder": _with_args(KafkaSpoutConfigBuilder),
    SPOUT_PKG + "KafkaSpoutConfig": _with_args(KafkaSpoutConfig),
    SPOUT_PKG + "KafkaSpoutRetryExponentialBackoff": _with_args(RetryExponentialBackoff),
    SPOUT_PKG + "KafkaSpoutRetryExponentialBackoff$TimeInterval": _with_args(TimeInterval),
    SPOUT_PKG + "DefaultRecordTranslator": _with_args(RecordTranslator),
    SPOUT_PKG + "ByTopicRecordTranslator": _with_args(TopicRouterTranslator),
    SPOUT_PKG + "SimpleRecordTranslator": _refuse(
        "takes a Java lambda (Func), which cannot run here; expected a Python translator class 'module.Class' "
        "with streams() and translate(topic, partition, offset, key, value)"),
    # flux-examples' translator: the record's value in field "value"
    "org.apache.storm.flux.examples.OnlyValueRecordTranslator": _with_args(lambda: ValueRecordTranslator("value")),
    BOLT_PKG + "selector.DefaultTopicSelector": _with_args(DefaultTopicSelector),
    BOLT_PKG + "selector.FieldNameBasedTopicSelector": _with_args(FieldNameBasedTopicSelector),
    BOLT_PKG + "mapper.FieldNameBasedTupleToKafkaMapper": _with_args(FieldNameBasedTupleToKafkaMapper),
    "java.util.Properties": _with_args(JavaProperties),
    "java.util.HashMap": _with_args(JavaProperties),
}

# Storm's ByTopicRecordTranslator method is forTopic; Python's name is for_topic
TopicRouterTranslator.forTopic = TopicRouterTranslator.for_topic  # type: ignore[attr-defined]


def _kafka_spout(obj: ObjectSpec, ctx: Context, inputs: Any) -> HeronComponentSpec:
    args = [resolve_refs(ctx, obj.where, a) for a in obj.constructor_args]
    if len(args) != 1 or not isinstance(args[0], KafkaSpoutConfig):
        raise ctx.err(obj.where, f"constructorArgs: KafkaSpout takes [ref to a KafkaSpoutConfig], found "
                                 f"{list(obj.constructor_args)!r}")
    if obj.properties:
        raise ctx.err(obj.where, f"properties: className '{obj.class_name}' has none; found "
                                 f"{[p for p, _ in obj.properties]}")
    config = {**args[0].options, **component_config(ctx, obj)}
    try:
        spec: HeronComponentSpec = KafkaSpout.spec(name=obj.id, par=obj.parallelism, config=config)
    except ConnectorConfigError as e:
        raise ctx.err(obj.where, str(e)) from None
    return spec


_BOLT_METHODS = ("withProducerProperties", "withTopicSelector", "withTupleToKafkaMapper", "setFireAndForget",
                 "setAsync")


def _kafka_bolt(obj: ObjectSpec, ctx: Context, inputs: Any) -> HeronComponentSpec:
    if obj.constructor_args:
        raise ctx.err(obj.where, f"constructorArgs: KafkaBolt takes none (use configMethods "
                                 f"{list(_BOLT_METHODS[:3])}); found {list(obj.constructor_args)!r}")
    options: dict[str, Any] = {}
    calls = [(m.name, [resolve_refs(ctx, obj.where, a) for a in m.args]) for m in obj.config_methods
             if m.name in _BOLT_METHODS]
    calls += [("set" + n[:1].upper() + n[1:], [resolve_refs(ctx, obj.where, v)]) for n, v in obj.properties]
    for name, args in calls:
        arg = args[0] if len(args) == 1 else None
        if name == "withProducerProperties" and isinstance(arg, dict):
            for k, v in arg.items():
                opt = producer_option(str(k), v)
                if opt is not None:
                    options[opt[0]] = opt[1]
        elif name == "withTopicSelector" and isinstance(arg, str):
            options["kafka.topic"] = arg  # Storm's withTopicSelector(String topic)
        elif (name == "withTopicSelector" and isinstance(arg, (DefaultTopicSelector, FieldNameBasedTopicSelector))) \
                or (name == "withTupleToKafkaMapper" and isinstance(arg, FieldNameBasedTupleToKafkaMapper)):
            options.update(arg.options)
        elif name == "setFireAndForget" and isinstance(arg, bool):
            options["kafka.fire.and.forget"] = arg
        elif name == "setAsync" and isinstance(arg, bool):
            pass  # heron-py's bolt always sends asynchronously and acks on the delivery report
        else:
            raise ctx.err(obj.where, f"{name}: expected one argument of the kind storm-kafka-client takes "
                                     f"(Properties/map, topic selector, FieldNameBasedTupleToKafkaMapper, "
                                     f"boolean), found {args!r}")
    config = {**options, **component_config(ctx, obj, _BOLT_METHODS)}
    try:
        # refused now rather than in the task: a bolt without producer properties or a topic
        from heron_py.connectors.kafka.config import bolt_config
        bolt_config(config, f"kafka bolt '{obj.id}'")
    except ConnectorConfigError as e:
        raise ctx.err(obj.where, str(e)) from None
    spec: HeronComponentSpec = KafkaBolt.spec(name=obj.id, inputs=inputs, par=obj.parallelism, config=config)
    return spec


SPOUTS: dict[str, Maker] = {SPOUT_PKG + "KafkaSpout": _kafka_spout}
BOLTS: dict[str, Maker] = {BOLT_PKG + "KafkaBolt": _kafka_bolt}
