"""Deserializers, serializers and record translators, by name or by class ("module.Class");
an unknown one is one error line naming the option and what is accepted."""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

from heron_py.connectors.base import ConnectorConfigError

DEFAULT_FIELDS = ("topic", "partition", "offset", "key", "value")
# Java class names Storm's files use → ours
JAVA_DESERIALIZERS = {
    "org.apache.kafka.common.serialization.StringDeserializer": "string",
    "org.apache.kafka.common.serialization.ByteArrayDeserializer": "bytes",
}
JAVA_SERIALIZERS = {
    "org.apache.kafka.common.serialization.StringSerializer": "string",
    "org.apache.kafka.common.serialization.ByteArraySerializer": "bytes",
}


def _load(where: str, key: str, name: str, builtins: list[str]) -> Any:
    mod, _, attr = name.rpartition(".")
    if mod:
        try:
            return getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as e:
            raise ConnectorConfigError(f"{where}: config {key}: class '{name}' cannot be imported "
                                       f"({type(e).__name__}: {e}); expected one of {builtins} or "
                                       f"'module.Class'") from None
    raise ConnectorConfigError(f"{where}: config {key}: unknown value '{name}'; expected one of {builtins} or "
                               f"'module.Class'")


def deserializer(where: str, key: str, name: str) -> Callable[[str, bytes | None], Any]:
    """(topic, bytes) → value. A class is instantiated and its ``deserialize(topic, data)``
    used; a function is called as is."""
    name = JAVA_DESERIALIZERS.get(name, name)
    if name == "string":
        return lambda _t, b: None if b is None else b.decode("utf-8", errors="replace")
    if name == "bytes":
        return lambda _t, b: b
    if name == "json":
        return lambda _t, b: None if b is None else json.loads(b)
    obj = _load(where, key, name, ["string", "bytes", "json", *JAVA_DESERIALIZERS])
    if isinstance(obj, type):
        inst = obj()
        return lambda t, b: inst.deserialize(t, b)
    return obj  # type: ignore[no-any-return]


def serializer(where: str, key: str, name: str) -> Callable[[Any], bytes | None]:
    name = JAVA_SERIALIZERS.get(name, name)
    if name == "string":
        # a str first: what a bolt's message and key fields nearly always hold
        return lambda v: v.encode() if type(v) is str else (
            None if v is None else (v if isinstance(v, bytes) else str(v).encode("utf-8")))
    if name == "bytes":
        return lambda v: v if v is None or isinstance(v, bytes) else bytes(v)
    if name == "json":
        return lambda v: None if v is None else json.dumps(v).encode("utf-8")
    obj = _load(where, key, name, ["string", "bytes", "json", *JAVA_SERIALIZERS])
    if isinstance(obj, type):
        inst = obj()
        return lambda v: inst.serialize(v)
    return obj  # type: ignore[no-any-return]


class RecordTranslator:
    """Storm's RecordTranslator: ``streams`` maps each output stream to its fields;
    ``translate`` turns one record into (stream, values), or None to skip it."""

    def streams(self) -> dict[str, tuple[str, ...]]:
        return {"default": DEFAULT_FIELDS}

    def translate(self, topic: str, partition: int, offset: int, key: Any, value: Any) -> tuple[str, list[Any]] | None:
        return "default", [topic, partition, offset, key, value]


class ValueRecordTranslator(RecordTranslator):
    """The value alone, in field "value" (flux-examples' OnlyValueRecordTranslator; its field
    is "str" there, set by ``field``)."""

    def __init__(self, field: str = "value") -> None:
        self.field = field

    def streams(self) -> dict[str, tuple[str, ...]]:
        return {"default": (self.field,)}

    def translate(self, topic: str, partition: int, offset: int, key: Any, value: Any) -> tuple[str, list[Any]] | None:
        return "default", [value]


class ByTopicRecordTranslator(RecordTranslator):
    """Each topic's records on a stream named after the topic, with the default fields
    (Storm's ByTopicRecordTranslator with the default translator per topic)."""

    def __init__(self, topics: tuple[str, ...]) -> None:
        self.topics = topics

    def streams(self) -> dict[str, tuple[str, ...]]:
        return {t: DEFAULT_FIELDS for t in self.topics}

    def translate(self, topic: str, partition: int, offset: int, key: Any, value: Any) -> tuple[str, list[Any]] | None:
        return topic, [topic, partition, offset, key, value]


class TopicRouterTranslator(RecordTranslator):
    """Storm's ByTopicRecordTranslator built from translators: each topic's records go through
    the translator set for it (``for_topic``), the others through ``default``. Two translators
    declaring one stream with different fields are refused, as Storm refuses them."""

    def __init__(self, default: RecordTranslator | None = None) -> None:
        self.default = default if default is not None else RecordTranslator()
        self.by_topic: dict[str, RecordTranslator] = {}

    def for_topic(self, topic: str, t: RecordTranslator) -> TopicRouterTranslator:
        if topic in self.by_topic:
            raise ConnectorConfigError(f"ByTopicRecordTranslator: topic '{topic}' has a translator already; "
                                       f"expected each topic once")
        self.by_topic[topic] = t
        self.streams()  # refuses a stream clash now, where the file says it
        return self

    def streams(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        for t in (self.default, *self.by_topic.values()):
            for stream, fields in t.streams().items():
                if out.get(stream, fields) != fields:
                    raise ConnectorConfigError(f"ByTopicRecordTranslator: stream '{stream}' is declared with fields "
                                               f"{list(out[stream])} and {list(fields)}; expected one set of "
                                               f"fields per stream")
                out[stream] = fields
        return out

    def translate(self, topic: str, partition: int, offset: int, key: Any, value: Any) -> tuple[str, list[Any]] | None:
        return self.by_topic.get(topic, self.default).translate(topic, partition, offset, key, value)


BUILTIN_TRANSLATORS = ["default", "value", "by_topic"]


def translator(where: str, name: Any, topics: tuple[str, ...]) -> RecordTranslator:
    """``name``: a built-in's name, "module.Class", or a translator object (Flux builds them)."""
    if not isinstance(name, str):
        if callable(getattr(name, "translate", None)) and callable(getattr(name, "streams", None)):
            return name  # type: ignore[no-any-return]
        raise ConnectorConfigError(f"{where}: config kafka.record.translator: expected a name or a record "
                                   f"translator, found {type(name).__name__}")
    if name == "default":
        return RecordTranslator()
    if name == "value":
        return ValueRecordTranslator()
    if name.startswith("value:"):
        return ValueRecordTranslator(name.split(":", 1)[1])
    if name == "by_topic":
        if not topics:
            raise ConnectorConfigError(f"{where}: config kafka.record.translator: 'by_topic' needs kafka.topics, "
                                       f"found kafka.topic.pattern")
        return ByTopicRecordTranslator(topics)
    cls = _load(where, "kafka.record.translator", name, BUILTIN_TRANSLATORS)
    inst = cls() if isinstance(cls, type) else None
    if inst is None or not callable(getattr(inst, "translate", None)) or not callable(getattr(inst, "streams", None)):
        raise ConnectorConfigError(f"{where}: config kafka.record.translator: '{name}' is not a record translator; "
                                   f"expected a class with streams() and translate(topic, partition, offset, key, "
                                   f"value)")
    return inst  # type: ignore[no-any-return]
