"""storm-redis's classes in Flux files, mapped to heron-py's Redis connectors.

A Flux file builds a ``JedisPoolConfig`` (host, port, timeout, password, database) and a mapper,
and hands both to a ``RedisStoreBolt``, ``RedisLookupBolt`` or ``RedisFilterBolt`` as
constructorArgs (the filter takes a stream id third, as storm-redis's does). The pool
config becomes the bolt's ``redis.*`` server options; the mapper must be a Python class (a
storm-redis mapper is Java code): one of yours with the snake-case methods of
``heron_py.connectors.redis.RedisStoreMapper``, ``RedisLookupMapper`` or ``RedisFilterMapper``,
or heron-py's
``heron_py.flux.redis_classes.FieldNameBasedMapper`` (data type, key field, value field,
additional key, output fields). ``RedisDataTypeDescription`` takes storm-redis's
constructorArgs (``[HASH, "wordCount"]``). heron-py's stream connectors (RedisStreamSpout,
RedisStreamBolt) have no Storm counterpart: name them by their Python class with ``properties``
(they arrive in the component's config).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from heron_py.api.component.component_spec import HeronComponentSpec
from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.redis.bolts import RedisFilterBolt, RedisLookupBolt, RedisStoreBolt
from heron_py.connectors.redis.mappers import FieldNameMapper, RedisDataType, RedisDataTypeDescription
from heron_py.flux.makers import Context, Maker, component_config, resolve_refs
from heron_py.flux.makers import constructor_args_only as _make
from heron_py.flux.model import ObjectSpec

PKG = "org.apache.storm.redis."


class JedisPoolConfig:
    """storm-redis's JedisPoolConfig(host, port, timeout ms, password, database)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 6379, timeout: int = 2000, password: str | None = None,
                 database: int = 0) -> None:
        self.options: dict[str, Any] = {"redis.host": host, "redis.port": port, "redis.timeout.ms": timeout,
                                        "redis.db": database}
        if password:
            self.options["redis.password"] = password


def data_type_description(data_type: Any, additional_key: str | None = None) -> RedisDataTypeDescription:
    name = str(data_type).rsplit(".", 1)[-1].upper()  # "HASH" or "RedisDataType.HASH"
    try:
        dt = RedisDataType(name)
    except ValueError:
        raise ConnectorConfigError(f"RedisDataTypeDescription: data type expected one of "
                                   f"{[t.value for t in RedisDataType]}, found {data_type!r}") from None
    return RedisDataTypeDescription(dt, additional_key)


class FieldNameBasedMapper(FieldNameMapper):
    """A store or lookup mapper by field names, for Flux files (constructorArgs: a
    RedisDataTypeDescription ref, key field, value field, and optionally the lookup's output
    fields)."""

    def __init__(self, description: RedisDataTypeDescription, key_field: str = "key", value_field: str = "value",
                 output_fields: list[str] | None = None) -> None:
        super().__init__(description, key_field, value_field, tuple(output_fields or ("key", "value")),
                         emit_input=False)


OBJECTS: dict[str, Callable[[ObjectSpec, Context], Any]] = {
    PKG + "common.config.JedisPoolConfig": _make(JedisPoolConfig),
    PKG + "common.mapper.RedisDataTypeDescription": _make(data_type_description),
}


def _bolt(cls: Any, kind: str, role: str) -> Maker:
    def make(obj: ObjectSpec, ctx: Context, inputs: Any) -> HeronComponentSpec:
        args = [resolve_refs(ctx, obj.where, a) for a in obj.constructor_args]
        # RedisFilterBolt(pool, mapper, streamId) also names the stream its inputs pass to
        stream = args.pop() if role == "filter" and len(args) == 3 and isinstance(args[2], str) else None
        if len(args) != 2 or not isinstance(args[0], JedisPoolConfig):
            takes = f"[ref to a JedisPoolConfig, ref to a {role} mapper" + (
                ", optionally a stream id]" if role == "filter" else "]")
            raise ctx.err(obj.where, f"constructorArgs: {kind} takes {takes}, found {list(obj.constructor_args)!r}")
        if obj.properties:
            raise ctx.err(obj.where, f"properties: className '{obj.class_name}' has none; found "
                                     f"{[p for p, _ in obj.properties]}")
        config = {**args[0].options, "redis.mapper": args[1], **component_config(ctx, obj)}
        if stream is not None:
            config["redis.filter.stream"] = stream
        try:  # spec() checks the mapper: refused now, not in the task
            spec: HeronComponentSpec = cls.spec(name=obj.id, inputs=inputs, par=obj.parallelism, config=config)
        except ConnectorConfigError as e:
            raise ctx.err(obj.where, str(e)) from None
        return spec
    return make


SPOUTS: dict[str, Maker] = {}
BOLTS: dict[str, Maker] = {
    PKG + "bolt.RedisStoreBolt": _bolt(RedisStoreBolt, "RedisStoreBolt", "store"),
    PKG + "bolt.RedisLookupBolt": _bolt(RedisLookupBolt, "RedisLookupBolt", "lookup"),
    PKG + "bolt.RedisFilterBolt": _bolt(RedisFilterBolt, "RedisFilterBolt", "filter"),
}
