"""storm-redis's mappers with Python names: a tuple → a key and a value, and the data type that
says which command writes (or reads) them.

``RedisDataTypeDescription(data_type, additional_key)``: for HASH (and HINCRBY) the
additional key is the hash's name and the tuple's key its field, as in storm-redis. heron-py
adds INCRBY and HINCRBY (the value is an integer added to the key), the word count's command.

A mapper is storm-redis's interface in snake case: ``get_data_type_description()``,
``get_key_from_tuple(tup)``, ``get_value_from_tuple(tup)``; a lookup mapper adds
``to_tuple(tup, value)`` → a list of value lists to emit and ``declare_output_fields()``; a
filter mapper has ``get_data_type_description()``, ``get_key_from_tuple(tup)`` and
``declare_output_fields()``.
``FieldNameMapper`` is the one built from the config (``redis.data.type``, ``redis.key.field``,
``redis.value.field``, ``redis.additional.key``); a class of yours is ``redis.mapper``
("module.Class", built without arguments)."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.common import config_error, opt_bool, opt_fields, opt_str


class RedisDataType(Enum):
    # the commands by bolt, as storm-redis has them: store / lookup / filter (the filter's check)
    STRING = "STRING"  # SET key value / GET key / EXISTS key
    HASH = "HASH"  # HSET additional_key key value / HGET additional_key key / HEXISTS additional_key key
    LIST = "LIST"  # RPUSH key value / LPOP key (storm-redis's lookup pops) / not filterable
    SET = "SET"  # SADD key value / SCARD key / SISMEMBER additional_key key
    SORTED_SET = "SORTED_SET"  # ZADD additional_key value(score) key / ZSCORE additional_key key / ZRANK
    HYPER_LOG_LOG = "HYPER_LOG_LOG"  # PFADD key value / PFCOUNT key / PFCOUNT key > 0
    GEO = "GEO"  # GEOADD additional_key lon lat key (value "lon:lat") / GEOPOS additional_key key / GEOPOS
    INCRBY = "INCRBY"  # heron-py's: INCRBY key value / GET key / EXISTS key
    HINCRBY = "HINCRBY"  # heron-py's: HINCRBY additional_key key value / HGET / HEXISTS


# the data types whose commands name a structure besides the tuple's key (storm-redis refuses a
# description of HASH, SORTED_SET or GEO without one); what the additional key names, for errors
ADDITIONAL_KEY_NAMES = {RedisDataType.HASH: "the hash's name", RedisDataType.HINCRBY: "the hash's name",
                        RedisDataType.SORTED_SET: "the sorted set's name", RedisDataType.GEO: "the geo set's name"}
NEEDS_ADDITIONAL_KEY = tuple(ADDITIONAL_KEY_NAMES)


@dataclass(frozen=True)
class RedisDataTypeDescription:
    data_type: RedisDataType
    additional_key: str | None = None

    def __post_init__(self) -> None:
        if self.data_type in NEEDS_ADDITIONAL_KEY and not self.additional_key:
            raise ConnectorConfigError(f"RedisDataTypeDescription: data type {self.data_type.value} needs an "
                                       f"additional key ({ADDITIONAL_KEY_NAMES[self.data_type]}), found "
                                       f"{self.additional_key!r}")


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


class RedisFilterMapper:
    """storm-redis's RedisFilterMapper: the data type, the key to check, the output fields (the
    filter emits its input's values unchanged)."""

    def get_data_type_description(self) -> RedisDataTypeDescription:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_data_type_description()")

    def get_key_from_tuple(self, tup: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not implement get_key_from_tuple()")

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


# what each bolt calls on its mapper (storm-redis's RedisStoreMapper, RedisLookupMapper and
# RedisFilterMapper, in snake case)
MAPPER_METHODS = {
    "store": ("get_data_type_description", "get_key_from_tuple", "get_value_from_tuple"),
    "lookup": ("get_data_type_description", "get_key_from_tuple", "get_value_from_tuple", "to_tuple",
               "declare_output_fields"),
    "filter": ("get_data_type_description", "get_key_from_tuple", "declare_output_fields"),
}


def mapper_from_config(conf: dict[str, Any], where: str, role: str) -> RedisStoreMapper:
    """The mapper of a store, lookup or filter bolt (``role``): ``redis.mapper`` (an object, or
    a "module.Class" built without arguments) or one built from the ``redis.*`` field options."""
    name = conf.get("redis.mapper")
    need = MAPPER_METHODS[role]
    if name is not None and not isinstance(name, str):
        # a mapper object (Flux passes the component it built)
        if not all(callable(getattr(name, m, None)) for m in need):
            raise config_error(where, "redis.mapper", f"a {role} mapper with {', '.join(need)}", name)
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
            raise config_error(where, "redis.mapper", f"a {role} mapper class with {', '.join(need)}", name)
        return inst  # type: ignore[no-any-return]
    dt = str(conf.get("redis.data.type", "STRING")).upper()
    try:
        data_type = RedisDataType(dt)
    except ValueError:
        raise config_error(where, "redis.data.type", f"one of {[t.value for t in RedisDataType]}",
                           conf.get("redis.data.type")) from None
    additional = opt_str(conf, where, "redis.additional.key", None)
    if data_type in NEEDS_ADDITIONAL_KEY and additional is None:
        raise config_error(where, "redis.additional.key",
                           f"{ADDITIONAL_KEY_NAMES[data_type]} (data type {data_type.value})", None)
    emit_input = opt_bool(conf, where, "redis.emit.input", False)
    if emit_input and "redis.output.fields" not in conf:
        raise config_error(where, "redis.output.fields", "the output fields (redis.emit.input is true: the "
                                                         "input's fields and the value's)", None)
    if role == "filter" and "redis.output.fields" not in conf:
        raise config_error(where, "redis.output.fields", "the output fields (a filter emits its input's values "
                                                         "unchanged: name the input's fields)", None)
    return FieldNameMapper(RedisDataTypeDescription(data_type, additional),
                           opt_str(conf, where, "redis.key.field", "key") or "key",
                           opt_str(conf, where, "redis.value.field", "value") or "value",
                           opt_fields(conf, where, "redis.output.fields", ("key", "value")), emit_input)


def field_value(v: Any) -> Any:
    """A tuple value as Redis takes it: bytes, str, int and float as they are, None as "",
    anything else as JSON."""
    if v is None:
        return ""
    if isinstance(v, (bytes, str, int, float)) and not isinstance(v, bool):
        return v
    return json.dumps(v, default=str)


def _number(value: Any, what: str, expected: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} expected {expected}, found {value!r}") from None


def store_value(desc: RedisDataTypeDescription, value: Any) -> Any:
    """A store mapper's value as its command takes it, or ValueError naming what was expected
    (the bolt fails that input): an integer for INCRBY and HINCRBY, a number (the score) for
    SORTED_SET, "longitude:latitude" (as storm-redis splits it) or a (longitude, latitude) pair for
    GEO; the other types' values as ``field_value`` writes them."""
    t = desc.data_type
    if t in (RedisDataType.INCRBY, RedisDataType.HINCRBY):
        # not int(value) alone: it would take True as 1 and cut 2.5 to 2
        try:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"{t.value} expected an integer value, found {value!r}") from None
    if t is RedisDataType.SORTED_SET:
        return _number(value, "SORTED_SET", "a number (the member's score)")
    if t is RedisDataType.GEO:
        if isinstance(value, (list, tuple)):
            parts = list(value)
        else:
            text = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
            parts = text.split(":")
        if len(parts) != 2:
            raise ValueError(f"GEO expected a value 'longitude:latitude' or a (longitude, latitude) pair, found "
                             f"{value!r}")
        lon, lat = (_number(p, "GEO", "a value 'longitude:latitude' of numbers") for p in parts)
        if not (-180 <= lon <= 180 and -85.05112878 <= lat <= 85.05112878):
            raise ValueError(f"GEO expected longitude in [-180, 180] and latitude in [-85.05112878, 85.05112878], "
                             f"found {value!r}")
        return lon, lat
    return field_value(value)


def store_command(pipe: Any, desc: RedisDataTypeDescription, key: Any, value: Any) -> None:
    """Queues the write of one tuple on a pipeline (``value`` from ``store_value``)."""
    t = desc.data_type
    if t is RedisDataType.STRING:
        pipe.set(key, value)
    elif t is RedisDataType.HASH:
        pipe.hset(desc.additional_key, key, value)
    elif t is RedisDataType.LIST:
        pipe.rpush(key, value)
    elif t is RedisDataType.SET:
        pipe.sadd(key, value)
    elif t is RedisDataType.SORTED_SET:
        pipe.zadd(desc.additional_key, {key: value})
    elif t is RedisDataType.HYPER_LOG_LOG:
        pipe.pfadd(key, value)
    elif t is RedisDataType.GEO:
        pipe.geoadd(desc.additional_key, (value[0], value[1], key))
    elif t is RedisDataType.INCRBY:
        pipe.incrby(key, value)
    else:
        pipe.hincrby(desc.additional_key, key, value)


def lookup_command(pipe: Any, desc: RedisDataTypeDescription, key: Any) -> None:
    """Queues the read of one tuple's key, storm-redis's RedisLookupBolt command by data type."""
    t = desc.data_type
    if t in (RedisDataType.STRING, RedisDataType.INCRBY):
        pipe.get(key)
    elif t in (RedisDataType.HASH, RedisDataType.HINCRBY):
        pipe.hget(desc.additional_key, key)
    elif t is RedisDataType.LIST:
        pipe.lpop(key)
    elif t is RedisDataType.SET:
        pipe.scard(key)
    elif t is RedisDataType.SORTED_SET:
        pipe.zscore(desc.additional_key, key)
    elif t is RedisDataType.GEO:
        pipe.geopos(desc.additional_key, key)
    else:
        pipe.pfcount(key)


def lookup_result(desc: RedisDataTypeDescription, v: Any) -> Any:
    """A lookup's reply as the mapper's ``to_tuple`` gets it: text decoded; GEO's position
    [longitude, latitude], or None for a member not in the set."""
    if desc.data_type is RedisDataType.GEO:
        pos = v[0] if isinstance(v, list) and v else None
        return None if pos is None else [float(pos[0]), float(pos[1])]
    if isinstance(v, list):
        return [_decode(x) for x in v]
    return _decode(v)


# a filter's check by data type (storm-redis's RedisFilterBolt); LIST has none there either
FILTERABLE = tuple(t for t in RedisDataType if t is not RedisDataType.LIST)


def filter_command(pipe: Any, desc: RedisDataTypeDescription, key: Any) -> None:
    """Queues the existence check of one tuple's key: a STRING key exists; the key is a field of
    the HASH, a member of the SET, SORTED_SET or GEO set named by the additional key; a
    HYPER_LOG_LOG at the key counts more than 0."""
    t = desc.data_type
    if t in (RedisDataType.STRING, RedisDataType.INCRBY):
        pipe.exists(key)
    elif t in (RedisDataType.HASH, RedisDataType.HINCRBY):
        pipe.hexists(desc.additional_key, key)
    elif t is RedisDataType.SET:
        pipe.sismember(desc.additional_key, key)
    elif t is RedisDataType.SORTED_SET:
        pipe.zrank(desc.additional_key, key)
    elif t is RedisDataType.GEO:
        pipe.geopos(desc.additional_key, key)
    elif t is RedisDataType.HYPER_LOG_LOG:
        pipe.pfcount(key)
    else:
        raise ValueError(f"data type {t.value} has no filter")


def filter_found(desc: RedisDataTypeDescription, reply: Any) -> bool:
    """Whether a filter's reply says the key is there (ZRANK's 0 is the first member; GEOPOS
    answers [None] for a missing member, which storm-redis counts as found: not here)."""
    t = desc.data_type
    if t is RedisDataType.SORTED_SET:
        return reply is not None
    if t is RedisDataType.GEO:
        return isinstance(reply, list) and bool(reply) and reply[0] is not None
    return bool(reply)
