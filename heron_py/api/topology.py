"""TopologyBuilder and class-style Topology, with heronpy's names and behaviour.

Both produce a ``TopologyDef`` (heron_py.planner.model). Component classes are pickled by
reference (module + name); classes of the topology file itself have module ``__main__`` and
are resolved inside containers against the file shipped in the topology package.
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Iterable, Mapping
from typing import Any

from heron_py.api import submit_hook
from heron_py.api.component.component_spec import GlobalStreamId, HeronComponentSpec
from heron_py.api.stream import Grouping, Stream
from heron_py.common.config_codec import sanitize_config
from heron_py.planner.errors import TopologyError
from heron_py.planner.model import (
    ComponentDef,
    ComponentKind,
    GroupingDef,
    InputDef,
    PickledRef,
    StreamDef,
    TopologyDef,
)

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def _stream_defs(where: str, outputs: Iterable[Any]) -> tuple[StreamDef, ...]:
    default_fields: list[str] = []
    streams: dict[str, StreamDef] = {}
    for o in outputs:
        if isinstance(o, str):
            default_fields.append(o)
        elif isinstance(o, Stream):
            if o.stream_id in streams:
                raise TopologyError(f"{where}: stream '{o.stream_id}' is declared twice in outputs")
            streams[o.stream_id] = StreamDef(o.stream_id, tuple(o.fields), o.direct)
        else:
            raise TopologyError(f"{where}: outputs entries must be field names (str) or Stream objects, "
                                f"found {o!r}")
    if default_fields:
        if Stream.DEFAULT_STREAM_ID in streams:
            raise TopologyError(f"{where}: declares the default stream both as field names and as a Stream")
        streams[Stream.DEFAULT_STREAM_ID] = StreamDef(Stream.DEFAULT_STREAM_ID, tuple(default_fields))
    return tuple(streams.values())


def _pickle_class(where: str, cls: Any) -> PickledRef:
    if not isinstance(cls, type):
        raise TopologyError(f"{where}: expected a Spout or Bolt class, found {cls!r}")
    if "<locals>" in cls.__qualname__:
        raise TopologyError(f"{where}: class {cls.__qualname__} is defined inside a function; define it at "
                            f"module level so every container can import it")
    try:
        return PickledRef(pickle.dumps(cls))
    except Exception as e:
        raise TopologyError(f"{where}: class {cls.__module__}.{cls.__qualname__} cannot be serialized "
                            f"({e})") from e


def _inputs(where: str, inputs: Any) -> tuple[InputDef, ...]:
    if inputs is None:
        return ()
    if isinstance(inputs, Mapping):
        items = list(inputs.items())
    elif isinstance(inputs, (list, tuple)):
        items = [(i, Grouping.SHUFFLE) for i in inputs]
    else:
        raise TopologyError(f"{where}: inputs must be a dict {{component: Grouping}} or a list of components, "
                            f"found {type(inputs).__name__}")
    out = []
    for src, grouping in items:
        if isinstance(src, GlobalStreamId):
            comp, stream = src.component_id, src.stream_id
        elif isinstance(src, HeronComponentSpec):
            if src.name is None:
                raise TopologyError(f"{where}: an input component has no name yet")
            comp, stream = src.name, Stream.DEFAULT_STREAM_ID
        elif isinstance(src, str):
            comp, stream = src, Stream.DEFAULT_STREAM_ID
        else:
            raise TopologyError(f"{where}: input keys must be component specs or GlobalStreamId, found {src!r}")
        if not isinstance(grouping, GroupingDef):
            raise TopologyError(f"{where}: input from '{comp}' has grouping {grouping!r}; expected a Grouping "
                                f"(Grouping.SHUFFLE, Grouping.fields(...), ...)")
        out.append(InputDef(comp, stream, grouping))
    return tuple(out)


def _parallelism(where: str, par: Any) -> int:
    if isinstance(par, bool) or not isinstance(par, int):
        raise TopologyError(f"{where}: parallelism must be an integer >= 1, found {par!r}")
    return par


def component_def(spec: HeronComponentSpec) -> ComponentDef:
    kind = "spout" if spec.is_spout else "bolt"
    where = f"{kind} '{spec.name}'"
    cls = spec.python_class_path
    if isinstance(cls, str):
        import importlib

        mod, _, name = cls.rpartition(".")
        cls = getattr(importlib.import_module(mod), name)
    outputs = _stream_defs(where, list(getattr(cls, "outputs", []) or []) + list(spec.outputs or []))
    return ComponentDef(
        name=str(spec.name),
        kind=ComponentKind.SPOUT if spec.is_spout else ComponentKind.BOLT,
        class_ref=_pickle_class(where, cls),
        class_name=f"{cls.__module__}:{cls.__qualname__}",
        par=_parallelism(where, spec.parallelism),
        inputs=_inputs(where, spec.inputs),
        outputs=outputs,
        config=sanitize_config(spec.custom_config or {}, f"config of {where}"),
    )


def build_topology(name: str, specs: Iterable[HeronComponentSpec], config: Mapping[str, Any]) -> TopologyDef:
    return TopologyDef(name=name, components=tuple(component_def(s) for s in specs),
                       config=sanitize_config(config, f"config of topology '{name}'"))


class TopologyBuilder:
    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not _NAME.match(name):
            raise TopologyError(f"topology name {name!r} is not valid: expected letters, digits, '.', '_' "
                                f"or '-'")
        self.topology_name = name
        self._specs: dict[str, HeronComponentSpec] = {}
        self._topology_config: dict[str, Any] = {}

    def add_spec(self, *specs: HeronComponentSpec) -> None:
        for spec in specs:
            if not isinstance(spec, HeronComponentSpec):
                raise TypeError(f"add_spec takes HeronComponentSpec objects, found {spec!r}")
            if spec.name is None or not isinstance(spec.name, str):
                raise TopologyError(f"topology '{self.topology_name}': a component has no name")
            if spec.name in self._specs:
                raise TopologyError(f"topology '{self.topology_name}': component name '{spec.name}' is used "
                                    f"twice; component names must be unique")
            self._specs[spec.name] = spec

    def add_spout(self, name: str, spout_cls: Any, par: int, config: dict[str, Any] | None = None,
                  optional_outputs: list[Any] | None = None) -> HeronComponentSpec:
        spec = spout_cls.spec(name=name, par=par, config=config, optional_outputs=optional_outputs)
        self.add_spec(spec)
        assert isinstance(spec, HeronComponentSpec)
        return spec

    def add_bolt(self, name: str, bolt_cls: Any, par: int, inputs: Any, config: dict[str, Any] | None = None,
                 optional_outputs: list[Any] | None = None) -> HeronComponentSpec:
        spec = bolt_cls.spec(name=name, inputs=inputs, par=par, config=config, optional_outputs=optional_outputs)
        self.add_spec(spec)
        assert isinstance(spec, HeronComponentSpec)
        return spec

    def set_config(self, config: dict[str, Any]) -> None:
        if not isinstance(config, dict):
            raise TypeError(f"set_config takes a dict, found {type(config).__name__}")
        self._topology_config = dict(config)

    def build(self) -> TopologyDef:
        return build_topology(self.topology_name, self._specs.values(), self._topology_config)

    def build_and_submit(self) -> None:
        submit_hook.submit(self.build())


_defined: list[type] = []


def defined_topologies() -> list[type]:
    """Topology subclasses defined so far (the CLI picks the one its file defined)."""
    return list(_defined)


class TopologyType(type):
    def __new__(mcs, classname: str, bases: tuple[type, ...], class_dict: dict[str, Any]) -> TopologyType:
        cls = super().__new__(mcs, classname, bases, class_dict)
        if bases:  # a user's topology, not the Topology base itself
            specs: dict[str, HeronComponentSpec] = {}
            for attr, value in class_dict.items():
                if isinstance(value, HeronComponentSpec):
                    if value.name is None:
                        value.name = attr
                    if value.name in specs:
                        raise TopologyError(f"topology '{classname}': component name '{value.name}' is used "
                                            f"twice; component names must be unique")
                    specs[value.name] = value
            cls._specs = specs  # type: ignore[attr-defined]
            _defined.append(cls)
        return cls


class Topology(metaclass=TopologyType):
    """Class-style topology: component specs and an optional ``config`` dict as class attributes."""

    config: dict[str, Any] = {}
    _specs: dict[str, HeronComponentSpec] = {}

    @classmethod
    def build(cls, name: str | None = None) -> TopologyDef:
        return build_topology(name or cls.__name__, cls._specs.values(), dict(cls.config or {}))

    @classmethod
    def build_and_submit(cls) -> None:
        submit_hook.submit(cls.build())
