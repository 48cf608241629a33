"""storm-jdbc's classes in Flux files, mapped to heron-py's PostgreSQL connectors.

A Flux file builds a ``HikariCPConnectionProvider`` from a map (``java.util.HashMap`` with
``put``: ``dataSource.url`` jdbc:postgresql://host:port/db, ``dataSource.user``,
``dataSource.password``; or HikariCP's ``jdbcUrl``/``username``/``password``), a mapper
(``SimpleJdbcMapper(tableName, provider)`` or ``SimpleJdbcMapper([Column, ...])``;
``SimpleJdbcLookupMapper(Fields, [Column, ...])``) and hands them to a ``JdbcInsertBolt``
(configMethods ``withTableName``, ``withInsertQuery``, ``withQueryTimeoutSecs``) or a
``JdbcLookupBolt`` (constructorArgs [provider, select query, lookup mapper];
``withQueryTimeoutSecs``). Storm's ``?`` placeholders become psycopg's ``%s``. Only PostgreSQL
is served (psycopg 3): another JDBC URL is one error line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from heron_py.api.component.component_spec import HeronComponentSpec
from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.postgres.bolts import PostgresInsertBolt, PostgresLookupBolt
from heron_py.connectors.postgres.config import insert_config, lookup_config
from heron_py.connectors.postgres.mappers import Column, SimpleJdbcLookupMapper, SimpleJdbcMapper
from heron_py.flux.makers import Context, Maker, component_config, resolve_refs
from heron_py.flux.makers import constructor_args_only as _make
from heron_py.flux.model import ObjectSpec

PKG = "org.apache.storm.jdbc."


class HikariCPConnectionProvider:
    """storm-jdbc's HikariCPConnectionProvider(Map hikariConfig) → the bolts' ``postgres.*``
    server options."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        if not isinstance(config, Mapping):
            raise ConnectorConfigError(f"HikariCPConnectionProvider: expected a map (java.util.HashMap), found "
                                       f"{config!r}")
        url = config.get("dataSource.url", config.get("jdbcUrl"))
        if not isinstance(url, str) or not url.startswith("jdbc:postgresql://"):
            raise ConnectorConfigError(f"HikariCPConnectionProvider: dataSource.url (or jdbcUrl) expected "
                                       f"jdbc:postgresql://host:port/dbname, found {url!r}")
        u = urlsplit(url[len("jdbc:"):])
        user = config.get("dataSource.user", config.get("username", "postgres"))
        password = config.get("dataSource.password", config.get("password"))
        auth = quote(str(user), safe="") + (f":{quote(str(password), safe='')}" if password else "")
        self.options: dict[str, Any] = {"postgres.url": f"postgresql://{auth}@{u.netloc}{u.path}"}


def column(name: str, sql_type: Any = None) -> Column:
    """storm-jdbc's Column(name, java.sql.Types int) (the type is informative)."""
    return Column(str(name), sql_type)


def simple_jdbc_mapper(first: Any, provider: Any = None) -> SimpleJdbcMapper:
    """SimpleJdbcMapper(tableName, provider): columns read from the table when the bolt connects;
    SimpleJdbcMapper([Column, ...]): those columns."""
    if isinstance(first, str):
        if not isinstance(provider, HikariCPConnectionProvider):
            raise ConnectorConfigError(f"SimpleJdbcMapper: with a table name expected [tableName, ref to a "
                                       f"HikariCPConnectionProvider], found [{first!r}, {provider!r}]")
        return SimpleJdbcMapper(None, table=first)
    return SimpleJdbcMapper(_columns(first, "SimpleJdbcMapper"))


def _columns(value: Any, what: str) -> list[Column]:
    if not isinstance(value, list) or not value or not all(isinstance(c, Column) for c in value):
        raise ConnectorConfigError(f"{what}: expected a list of refs to org.apache.storm.jdbc.common.Column, found "
                                   f"{value!r}")
    return value


def simple_jdbc_lookup_mapper(output_fields: Any, query_columns: Any) -> SimpleJdbcLookupMapper:
    names = getattr(output_fields, "fields", output_fields)  # a Fields object or a list of names
    if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
        raise ConnectorConfigError(f"SimpleJdbcLookupMapper: output fields expected a Fields or a list of names, "
                                   f"found {output_fields!r}")
    return SimpleJdbcLookupMapper(list(names), _columns(query_columns, "SimpleJdbcLookupMapper"))


class Fields:
    """org.apache.storm.tuple.Fields(list of names), for SimpleJdbcLookupMapper."""

    def __init__(self, *names: Any) -> None:
        flat = list(names[0]) if len(names) == 1 and isinstance(names[0], list) else list(names)
        self.fields = [str(n) for n in flat]


def storm_placeholders(query: str) -> str:
    """Storm's ``?`` placeholders → psycopg's ``%s`` (a query already with %s is kept)."""
    return query if "%s" in query else re.sub(r"\?", "%s", query)


OBJECTS: dict[str, Callable[[ObjectSpec, Context], Any]] = {
    PKG + "common.HikariCPConnectionProvider": _make(HikariCPConnectionProvider),
    PKG + "common.Column": _make(column),
    PKG + "mapper.SimpleJdbcMapper": _make(simple_jdbc_mapper),
    PKG + "mapper.SimpleJdbcLookupMapper": _make(simple_jdbc_lookup_mapper),
    "org.apache.storm.tuple.Fields": _make(Fields),
}

_METHODS = ("withTableName", "withInsertQuery", "withQueryTimeoutSecs")


def _methods(ctx: Context, obj: ObjectSpec, allowed: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in obj.config_methods:
        if m.name in allowed:
            if len(m.args) != 1:
                raise ctx.err(obj.where, f"configMethods '{m.name}': expected one argument, found {list(m.args)!r}")
            out[m.name] = m.args[0]
    return out


def _insert_bolt(obj: ObjectSpec, ctx: Context, inputs: Any) -> HeronComponentSpec:
    args = [resolve_refs(ctx, obj.where, a) for a in obj.constructor_args]
    if len(args) != 2 or not isinstance(args[0], HikariCPConnectionProvider) or not callable(
            getattr(args[1], "get_columns", None)):
        raise ctx.err(obj.where, f"constructorArgs: JdbcInsertBolt takes [ref to a HikariCPConnectionProvider, ref "
                                 f"to a JdbcMapper], found {list(obj.constructor_args)!r}")
    if obj.properties:
        raise ctx.err(obj.where, f"properties: className '{obj.class_name}' has none; found "
                                 f"{[p for p, _ in obj.properties]}")
    methods = _methods(ctx, obj, _METHODS)
    if "withTableName" in methods and "withInsertQuery" in methods:
        # storm-jdbc refuses both too: which one writes would be a guess
        raise ctx.err(obj.where, f"configMethods: JdbcInsertBolt takes withTableName or withInsertQuery, not both; "
                                 f"found withTableName {methods['withTableName']!r} and withInsertQuery "
                                 f"{methods['withInsertQuery']!r}")
    mapper = args[1]
    config: dict[str, Any] = {**args[0].options, "postgres.mapper": mapper}
    table = methods.get("withTableName", getattr(mapper, "table", None))
    if "withInsertQuery" in methods:
        config["postgres.insert.query"] = storm_placeholders(str(methods["withInsertQuery"]))
        if getattr(mapper, "columns", None) is None:
            raise ctx.err(obj.where, "withInsertQuery: expected a SimpleJdbcMapper with a list of Columns (the "
                                     "query's placeholders in order), found one reading the table's columns")
        config["postgres.columns"] = [c.name for c in mapper.columns]
    elif table is not None:
        config["postgres.table"] = table
    if "withQueryTimeoutSecs" in methods:
        config["postgres.query.timeout.secs"] = methods["withQueryTimeoutSecs"]
    config.update(component_config(ctx, obj, allowed=_METHODS))
    try:
        insert_config(config, f"JdbcInsertBolt '{obj.id}'")  # refused now, not in the task
        spec: HeronComponentSpec = PostgresInsertBolt.spec(name=obj.id, inputs=inputs, par=obj.parallelism,
                                                           config=config)
    except ConnectorConfigError as e:
        raise ctx.err(obj.where, str(e)) from None
    return spec


def _lookup_bolt(obj: ObjectSpec, ctx: Context, inputs: Any) -> HeronComponentSpec:
    args = [resolve_refs(ctx, obj.where, a) for a in obj.constructor_args]
    if len(args) != 3 or not isinstance(args[0], HikariCPConnectionProvider) or not isinstance(args[1], str) \
            or not isinstance(args[2], SimpleJdbcLookupMapper):
        raise ctx.err(obj.where, f"constructorArgs: JdbcLookupBolt takes [ref to a HikariCPConnectionProvider, a "
                                 f"select query, ref to a SimpleJdbcLookupMapper], found "
                                 f"{list(obj.constructor_args)!r}")
    methods = _methods(ctx, obj, ("withQueryTimeoutSecs",))
    mapper = args[2]
    config: dict[str, Any] = {**args[0].options, "postgres.select.query": storm_placeholders(args[1]),
                              "postgres.mapper": mapper,
                              "postgres.query.fields": [c.name for c in mapper.columns or ()],
                              "postgres.output.fields": list(mapper.output_fields)}
    if "withQueryTimeoutSecs" in methods:
        config["postgres.query.timeout.secs"] = methods["withQueryTimeoutSecs"]
    config.update(component_config(ctx, obj, allowed=("withQueryTimeoutSecs",)))
    try:
        lookup_config(config, f"JdbcLookupBolt '{obj.id}'")
        spec: HeronComponentSpec = PostgresLookupBolt.spec(name=obj.id, inputs=inputs, par=obj.parallelism,
                                                           config=config)
    except ConnectorConfigError as e:
        raise ctx.err(obj.where, str(e)) from None
    return spec


SPOUTS: dict[str, Maker] = {}
BOLTS: dict[str, Maker] = {
    PKG + "bolt.JdbcInsertBolt": _insert_bolt,
    PKG + "bolt.JdbcLookupBolt": _lookup_bolt,
}
