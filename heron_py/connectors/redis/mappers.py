"""storm-redis's mappers with Python names: a tuple → a key and a value, and the data type that
says which command writes (or reads) them.

``RedisDataTypeDescription(data_type, additional_key)``: for HASH (and HINCRBY) the
additional key is the hash's name and the tuple's key its field, as in storm-redis. heron-py
adds INCRBY and HINCRBY (the value is an integer added to the key), the word count's command.

A mapper is storm-redis's interface in snake case: ``get_data_type_description()``,
``get_key_from_tuple(tup)``, ``get_value_from_tuple(tup)``; a lookup mapper adds
``to_tuple(tup, value)`` → a list of value lists to emit and ``declare_output_fields()``.
``FieldNameMapper`` is the one built from the config (``redis.data.type``, ``redis.key.field``,
``redis.value.field``, ``redis.additional.key``); a class of yours is ``redis.mapper``
("module.Class", built without arguments)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import Enum
from typing import Any

from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.common import config_error, opt_bool, opt_fields, opt_str


class RedisDataType(Enum):
    STRING = "STRING"  # SET / GET
    HASH = "HASH"  # HSET / HGET additional_key key
    LIST = "LIST"  # RPUSH / LRANGE 0 -1
    SET = "SET"  # SADD / SISMEMBER key value
    HYPER_LOG_LOG = "HYPER_LOG_LOG"  # PFADD / PFCOUNT
    INCRBY = "INCRBY"  # INCRBY / GET
    HINCRBY = "HINCRBY"  # HINCRBY / HGET additional_key key


NEEDS_ADDITIONAL_KEY = (RedisDataType.HASH, RedisDataType.HINCRBY)


@dataclass(frozen=True)
class RedisDataTypeDescription:
    data_type: RedisDataType
    additional_key: str | None = None

    def __post_init__(self) -> None:
        if self.data_type in NEEDS_ADDITIONAL_KEY and not self.additional_key:
            raise ConnectorConfigError(f"RedisDataTypeDescription: data type {self.data_type.value} needs an "
                                       f"additional key (the hash's name), found {self.additional_key!r}")


class RedisStoreMapper:
    def get_data_type_description(self) -> RedisDataTypeDescription:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_data_type_description()")

    def get_key_from_tuple(self, tup: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_key_from_tuple()")

    def get_value_from_tuple(self, tup: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_value_from_tuple()")


class RedisLookupMapper(RedisStoreMapper):
    def to_tuple(self, tup: Any, value: Any) -> list[list[Any]]:
        raise NotImplementedError(f"{type(self).__name__} does not implement to_tuple()")

    def declare_output_fields(self) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} does not implement declare_output_fields()")


class FieldNameMapper(RedisLookupMapper):
    """Key and value by field name. As a lookup mapper it emits ``[key, value]`` (fields
    ``redis.output.fields``, default key and value), or with ``redis.emit.input`` the input's
    values followed by the value (``redis.output.fields`` then names them all).
    ``fields_of(tup)`` gives the input's field names (the bolt sets it)."""

    def __init__(self, description: RedisDataTypeDescription, key_field: str, value_field: str,
                 outputs: tuple[str, ...], emit_input: bool) -> None:
        self.description = description
        self.key_field = key_field
        self.value_field = value_field
        self.outputs = outputs
        self.emit_input = emit_input
        self.fields_of: Any = None

    def get_data_type_description(self) -> RedisDataTypeDescription:
        return self.description

    def _get(self, tup: Any, name: str) -> Any:
        return self.fields_of.get(tup, name)

    def get_key_from_tuple(self, tup: Any) -> Any:
        return self._get(tup, self.key_field)

    def get_value_from_tuple(self, tup: Any) -> Any:
        return self._get(tup, self.value_field)

    def to_tuple(self, tup: Any, value: Any) -> list[list[Any]]:
        if self.emit_input:
            return [[*tup.values, value]]
        return [[self.get_key_from_tuple(tup), value]]

    def declare_output_fields(self) -> list[str]:
        return list(self.outputs)


def _decode(v: Any) -> Any:
    return v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v


def mapper_from_config(conf: dict[str, Any], where: str, lookup: bool) -> RedisStoreMapper:
    name = conf.get("redis.mapper")
    need = ["get_data_type_description", "get_key_from_tuple", "get_value_from_tuple"]
    if lookup:
        need += ["to_tuple", "declare_output_fields"]
    if name is not None and not isinstance(name, str):
        # a mapper object (Flux passes the component it built)
        if not all(callable(getattr(name, m, None)) for m in need):
            raise config_error(where, "redis.mapper", f"a {'lookup' if lookup else 'store'} mapper with "
                                                      f"{', '.join(need)}", name)
        return name  # type: ignore[no-any-return]
    if name is not None:
        mod, _, attr = str(name).rpartition(".")
        try:
            cls = getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError, ValueError) as e:
            raise config_error(where, "redis.mapper", f"an importable 'module.Class' ({type(e).__name__}: {e})",
                               name) from None
        inst = cls() if isinstance(cls, type) else None
        if inst is None or not all(callable(getattr(inst, m, None)) for m in need):
            raise config_error(where, "redis.mapper", f"a {'lookup' if lookup else 'store'} mapper class with "
                                                      f"{', '.join(need)}", name)
        return inst  # type: ignore[no-any-return]
    dt = str(conf.get("redis.data.type", "STRING")).upper()
    try:
        data_type = RedisDataType(dt)
    except ValueError:
        raise config_error(where, "redis.data.type", f"one of {[t.value for t in RedisDataType]}",
                           conf.get("redis.data.type")) from None
    additional = opt_str(conf, where, "redis.additional.key", None)
    if data_type in NEEDS_ADDITIONAL_KEY and additional is None:
        raise config_error(where, "redis.additional.key", f"the hash's name (data type {data_type.value})", None)
    emit_input = opt_bool(conf, where, "redis.emit.input", False)
    if emit_input and "redis.output.fields" not in conf:
        raise config_error(where, "redis.output.fields", "the output fields (redis.emit.input is true: the "
                                                         "input's fields and the value's)", None)
    return FieldNameMapper(RedisDataTypeDescription(data_type, additional),
                           opt_str(conf, where, "redis.key.field", "key") or "key",
                           opt_str(conf, where, "redis.value.field", "value") or "value",
                           opt_fields(conf, where, "redis.output.fields", ("key", "value")), emit_input)


def store_command(pipe: Any, desc: RedisDataTypeDescription, key: Any, value: Any) -> None:
    """Queues the write of one tuple on a pipeline."""
    t = desc.data_type
    if t is RedisDataType.STRING:
        pipe.set(key, value)
    elif t is RedisDataType.HASH:
        pipe.hset(desc.additional_key, key, value)
    elif t is RedisDataType.LIST:
        pipe.rpush(key, value)
    elif t is RedisDataType.SET:
        pipe.sadd(key, value)
    elif t is RedisDataType.HYPER_LOG_LOG:
        pipe.pfadd(key, value)
    elif t is RedisDataType.INCRBY:
        pipe.incrby(key, int(value))
    else:
        pipe.hincrby(desc.additional_key, key, int(value))


def lookup_command(pipe: Any, desc: RedisDataTypeDescription, key: Any, value: Any) -> None:
    t = desc.data_type
    if t in (RedisDataType.STRING, RedisDataType.INCRBY):
        pipe.get(key)
    elif t in NEEDS_ADDITIONAL_KEY:
        pipe.hget(desc.additional_key, key)
    elif t is RedisDataType.LIST:
        pipe.lrange(key, 0, -1)
    elif t is RedisDataType.SET:
        pipe.sismember(key, value)
    else:
        pipe.pfcount(key)


def lookup_result(v: Any) -> Any:
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return _decode(v)
