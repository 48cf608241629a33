"""A Flux file's YAML document → checked definitions (pure: no files, no imports of classes).

Field names and defaults follow Storm's flux-core model (TopologyDef, SpoutDef, BoltDef,
StreamDef, GroupingDef, IncludeDef, ObjectDef): parallelism defaults to 1, a grouping's
stream to "default", an include's ``resource`` and ``override`` to false. Unknown keys are
refused, as Flux's bean mapping refuses them, so a misspelt key is not silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from heron_py.flux.errors import FluxError, type_name

GROUPING_TYPES = ("SHUFFLE", "FIELDS", "ALL", "GLOBAL", "NONE", "DIRECT", "LOCAL_OR_SHUFFLE", "CUSTOM")
_TOP_KEYS = {"name", "config", "components", "spouts", "bolts", "streams", "includes", "topologySource",
             "workerHooks"}
# Storm's resource hints and task counts are accepted and ignored: heron-py runs one task
# per unit of parallelism and packs round-robin.
_IGNORED_OBJECT_KEYS = {"numTasks", "onHeapMemoryLoad", "offHeapMemoryLoad", "cpuLoad"}
_OBJECT_KEYS = {"id", "className", "parallelism", "constructorArgs", "configMethods", "properties",
                "factory", "factoryMethod", *_IGNORED_OBJECT_KEYS}


@dataclass(frozen=True)
class ConfigMethod:
    name: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class ObjectSpec:
    """A spout, bolt, component or custom grouping class as the file declares it."""

    where: str  # "bolt 'count'", for messages
    id: str
    class_name: str
    parallelism: int = 1
    constructor_args: tuple[Any, ...] = ()
    config_methods: tuple[ConfigMethod, ...] = ()
    properties: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class GroupingSpec:
    type: str
    stream_id: str = "default"
    args: tuple[str, ...] | None = None
    custom_class: ObjectSpec | None = None


@dataclass(frozen=True)
class StreamSpec:
    where: str  # "stream 'spout --> split'"
    source: str
    target: str
    grouping: GroupingSpec


@dataclass(frozen=True)
class IncludeSpec:
    file: str
    resource: bool = False
    override: bool = False


@dataclass
class FluxDef:
    """One parsed file; ``merge`` applies an include as Flux's FluxParser.processIncludes."""

    name: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    components: dict[str, ObjectSpec] = field(default_factory=dict)
    spouts: dict[str, ObjectSpec] = field(default_factory=dict)
    bolts: dict[str, ObjectSpec] = field(default_factory=dict)
    streams: list[StreamSpec] = field(default_factory=list)
    includes: list[IncludeSpec] = field(default_factory=list)

    def merge(self, other: FluxDef, override: bool) -> None:
        """Without ``override`` only what this file lacks is taken; streams are always
        appended (Flux cannot tell two streams apart either)."""
        if other.name is not None and (self.name is None or override):
            self.name = other.name
        for key, value in other.config.items():
            if override or key not in self.config:
                self.config[key] = value
        for mine, theirs in ((self.components, other.components), (self.spouts, other.spouts),
                             (self.bolts, other.bolts)):
            for oid, spec in theirs.items():
                if override or oid not in mine:
                    mine[oid] = spec
        self.streams.extend(other.streams)


class _Reader:
    """Typed access to one mapping of the document, with the file and owner in every error."""

    def __init__(self, file: str, where: str, data: Any, allowed: set[str]) -> None:
        self.prefix = f"flux file {file}: {where}"
        if not isinstance(data, dict):
            raise FluxError(f"{self.prefix}: expected a mapping, found {type_name(data)}")
        unknown = sorted(str(k) for k in data if k not in allowed)
        if unknown:
            raise FluxError(f"{self.prefix}: unknown key(s) {unknown}; expected some of {sorted(allowed)}")
        self.data: dict[Any, Any] = data

    def _typed(self, key: str, ok: bool, expected: str, default: Any) -> Any:
        value = self.data.get(key, default)
        if key in self.data and not ok:
            raise FluxError(f"{self.prefix} key '{key}': expected {expected}, found {type_name(value)} "
                            f"({value!r})")
        return value

    def text(self, key: str, default: str | None = None, required: bool = False) -> Any:
        if required and key not in self.data:
            raise FluxError(f"{self.prefix}: key '{key}' is missing; expected a string")
        return self._typed(key, isinstance(self.data.get(key), str), "a string", default)

    def count(self, key: str, default: int) -> Any:
        v = self.data.get(key)
        return self._typed(key, isinstance(v, int) and not isinstance(v, bool) and v >= 1,
                           "an integer >= 1", default)

    def flag(self, key: str, default: bool) -> Any:
        return self._typed(key, isinstance(self.data.get(key), bool), "true or false", default)

    def items(self, key: str) -> list[Any]:
        v = self._typed(key, isinstance(self.data.get(key), list) or self.data.get(key) is None, "a list", None)
        return list(v or [])

    def mapping(self, key: str) -> dict[Any, Any]:
        v = self._typed(key, isinstance(self.data.get(key), dict) or self.data.get(key) is None, "a mapping",
                        None)
        return dict(v or {})


def _config_methods(file: str, where: str, raw: list[Any]) -> tuple[ConfigMethod, ...]:
    out = []
    for i, m in enumerate(raw):
        r = _Reader(file, f"{where} configMethods[{i}]", m, {"name", "args"})
        out.append(ConfigMethod(r.text("name", required=True), tuple(r.items("args"))))
    return tuple(out)


def _properties(file: str, where: str, raw: list[Any]) -> tuple[tuple[str, Any], ...]:
    out = []
    for i, p in enumerate(raw):
        r = _Reader(file, f"{where} properties[{i}]", p, {"name", "value", "ref"})
        value = {"ref": r.text("ref")} if "ref" in r.data else r.data.get("value")
        out.append((r.text("name", required=True), value))
    return tuple(out)


def parse_object(file: str, kind: str, data: Any, index: int) -> ObjectSpec:
    """A spout, bolt or component entry (``kind``) of the file."""
    where = f"{kind} {index}"
    if isinstance(data, dict) and isinstance(data.get("id"), str):
        where = f"{kind} '{data['id']}'"
    r = _Reader(file, where, data, _OBJECT_KEYS if kind != "customClass" else _OBJECT_KEYS - {"id"})
    if "factory" in r.data or "factoryMethod" in r.data:
        raise FluxError(f"{r.prefix}: 'factory'/'factoryMethod' create Java objects; heron-py supports "
                        f"'className' with 'constructorArgs' only")
    oid = r.text("id", required=kind != "customClass") or ""
    return ObjectSpec(
        where=where, id=oid, class_name=r.text("className", required=True),
        parallelism=r.count("parallelism", 1), constructor_args=tuple(r.items("constructorArgs")),
        config_methods=_config_methods(file, where, r.items("configMethods")),
        properties=_properties(file, where, r.items("properties")),
    )


def _grouping(file: str, where: str, data: Any) -> GroupingSpec:
    r = _Reader(file, f"{where} grouping", data, {"type", "streamId", "args", "customClass"})
    gtype = r.text("type", required=True)
    if gtype not in GROUPING_TYPES:
        raise FluxError(f"{r.prefix} type: expected one of {', '.join(GROUPING_TYPES)}, found {gtype!r}")
    args = r.data.get("args")
    if args is not None and (not isinstance(args, list) or not all(isinstance(a, str) for a in args)):
        raise FluxError(f"{r.prefix} key 'args': expected a list of field names, found {type_name(args)} "
                        f"({args!r})")
    if gtype == "FIELDS" and not args:
        raise FluxError(f"{r.prefix}: type FIELDS needs 'args', the field names to group on; expected a "
                        f"list of field names, found {args!r}")
    custom = None
    if gtype == "CUSTOM":
        if "customClass" not in r.data:
            raise FluxError(f"{r.prefix}: type CUSTOM needs 'customClass' with a 'className'; found none")
        custom = parse_object(file, "customClass", r.data["customClass"], 0)
        custom = ObjectSpec(f"{where} customClass", custom.id, custom.class_name, 1, custom.constructor_args,
                            custom.config_methods, custom.properties)
    return GroupingSpec(gtype, r.text("streamId", "default"), tuple(args) if args is not None else None, custom)


def parse_stream(file: str, data: Any, index: int) -> StreamSpec:
    where = f"stream {index}"
    if isinstance(data, dict) and isinstance(data.get("name"), str):
        where = f"stream '{data['name']}'"
    r = _Reader(file, where, data, {"name", "from", "to", "grouping"})
    if "grouping" not in r.data:
        raise FluxError(f"{r.prefix}: key 'grouping' is missing; expected a mapping with a 'type'")
    return StreamSpec(where, r.text("from", required=True), r.text("to", required=True),
                      _grouping(file, where, r.data["grouping"]))


def _objects(file: str, kind: str, raw: list[Any]) -> dict[str, ObjectSpec]:
    out: dict[str, ObjectSpec] = {}
    for i, d in enumerate(raw):
        spec = parse_object(file, kind, d, i)
        if spec.id in out:
            raise FluxError(f"flux file {file}: {kind} id '{spec.id}' is used twice; expected unique ids")
        out[spec.id] = spec
    return out


def parse_document(file: str, data: Any) -> FluxDef:
    """The whole document; includes are listed, not read (that is I/O: see loader)."""
    r = _Reader(file, "top level", data if data is not None else {}, _TOP_KEYS)
    if "topologySource" in r.data:
        raise FluxError(f"flux file {file}: 'topologySource' names a Java class building a StormTopology; "
                        f"heron-py supports the YAML DSL (spouts, bolts, streams) only")
    if "workerHooks" in r.data:
        raise FluxError(f"flux file {file}: 'workerHooks' are Java worker hooks; heron-py has none")
    config = r.mapping("config")
    if any(not isinstance(k, str) for k in config):
        raise FluxError(f"flux file {file}: config keys must be strings, found {sorted(map(repr, config))}")
    includes = []
    for i, inc in enumerate(r.items("includes")):
        ir = _Reader(file, f"includes[{i}]", inc, {"file", "resource", "override"})
        includes.append(IncludeSpec(ir.text("file", required=True), ir.flag("resource", False),
                                    ir.flag("override", False)))
    name = r.data.get("name")
    if name is not None and not isinstance(name, str):
        name = str(name)  # a numeric name is still a name (YAML typed it)
    return FluxDef(
        name=name, config=config, components=_objects(file, "component", r.items("components")),
        spouts=_objects(file, "spout", r.items("spouts")), bolts=_objects(file, "bolt", r.items("bolts")),
        streams=[parse_stream(file, s, i) for i, s in enumerate(r.items("streams"))], includes=includes,
    )
