"""TopologyBuilder and class-style Topology, with heronpy's names and behaviour.

Both produce a ``TopologyDef`` (heron_py.planner.model) instead of heronpy's protobuf file.
Component classes are pickled by reference (module + qualified name); classes of the
topology file itself have module ``__main__`` and are resolved inside containers against the
file shipped in the topology package. Everything that must cross to another process (classes,
custom groupings, config values) is pickled here, at build, so a part that cannot travel is
refused at submit with the component's name rather than crashing a container later.
"""

from __future__ import annotations

import importlib
import os
import pickle
import re
from collections.abc import Iterable, Mapping
from typing import Any

from heron_py.api import api_constants, submit_hook
from heron_py.api.component.component_spec import GlobalStreamId, HeronComponentSpec
from heron_py.api.stream import Grouping, Stream
from heron_py.common.config import STATE_RESCALE
from heron_py.common.config_codec import ConfigCodecError, sanitize_config
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import check_topology_name
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
_NAME_RULE = "expected letters, digits, '.', '_' or '-'"


def _stream_defs(where: str, outputs: Any) -> tuple[StreamDef, ...]:
    """heronpy's rule: str entries are fields of the default stream; a Stream names its own
    (a default-stream Stream extends the str fields)."""
    if not isinstance(outputs, (list, tuple)):
        raise TopologyError(f"{where}: outputs must be a list of field names (str) or Stream objects, "
                            f"found {type(outputs).__name__}")
    fields: dict[str, list[str]] = {}
    direct: dict[str, bool] = {}
    for o in outputs:
        if isinstance(o, str):
            fields.setdefault(Stream.DEFAULT_STREAM_ID, []).append(o)
        elif isinstance(o, Stream):
            if o.stream_id in fields and o.stream_id != Stream.DEFAULT_STREAM_ID:
                raise TopologyError(f"{where}: stream '{o.stream_id}' is declared twice in outputs; expected "
                                    f"one Stream per stream name")
            fields.setdefault(o.stream_id, []).extend(o.fields)
            direct[o.stream_id] = direct.get(o.stream_id, False) or o.direct
        else:
            raise TopologyError(f"{where}: outputs entries must be field names (str) or Stream objects, "
                                f"found {o!r}")
    out = []
    for name, fs in fields.items():
        dup = sorted({f for f in fs if fs.count(f) > 1})
        if dup:
            raise TopologyError(f"{where}: stream '{name}' declares field(s) {dup} more than once; "
                                f"expected distinct field names (found {fs})")
        out.append(StreamDef(name, tuple(fs), direct.get(name, False)))
    return tuple(out)


def _resolve_class(where: str, cls: Any) -> type:
    if isinstance(cls, str):
        # heronpy's "module.Class" path
        mod, _, name = cls.rpartition(".")
        try:
            cls = getattr(importlib.import_module(mod), name)
        except (ImportError, AttributeError, ValueError) as e:
            raise TopologyError(f"{where}: class '{cls}' cannot be imported ({e}); expected 'module.Class'") from e
    if not isinstance(cls, type):
        raise TopologyError(f"{where}: expected a Spout or Bolt class, found {cls!r}")
    return cls


def _pickle_class(where: str, cls: type) -> PickledRef:
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
    seen: set[tuple[str, str]] = set()
    for src, grouping in items:
        if isinstance(src, GlobalStreamId):
            comp, stream = src.component_id, src.stream_id
        elif isinstance(src, HeronComponentSpec):
            if src.name is None:
                raise TopologyError(f"{where}: an input component spec has no name; add it to the topology "
                                    f"(or give it name=...) first")
            comp, stream = src.name, Stream.DEFAULT_STREAM_ID
        elif isinstance(src, str):
            comp, stream = src, Stream.DEFAULT_STREAM_ID
        else:
            raise TopologyError(f"{where}: inputs must name component specs, spec['stream'] or component names, "
                                f"found {src!r}")
        if not isinstance(grouping, GroupingDef):
            raise TopologyError(f"{where}: input from '{comp}' has grouping {grouping!r}; expected a Grouping "
                                f"(Grouping.SHUFFLE, Grouping.fields(...), ...)")
        if (comp, stream) in seen:
            raise TopologyError(f"{where}: subscribes to '{comp}' stream '{stream}' twice; expected one "
                                f"grouping per input stream")
        seen.add((comp, stream))
        out.append(InputDef(comp, stream, grouping))
    return tuple(out)


def _parallelism(where: str, par: Any) -> int:
    if isinstance(par, bool) or not isinstance(par, int):
        raise TopologyError(f"{where}: parallelism must be an integer >= 1, found {par!r}")
    return par


def _config(where: str, config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if not isinstance(config, Mapping):
        raise TopologyError(f"{where}: config must be a dict, found {type(config).__name__}")
    try:
        return sanitize_config(config, where)
    except ConfigCodecError as e:
        raise TopologyError(str(e)) from e


def component_def(spec: HeronComponentSpec) -> ComponentDef:
    """One spec → its plan entry, with every part serialized (see the module docstring)."""
    kind = "spout" if spec.is_spout else "bolt"
    where = f"{kind} '{spec.name}'"
    par = _parallelism(where, spec.parallelism)
    cls = _resolve_class(where, spec.python_class_path)
    # heronpy puts the parallelism into each component's config, under the user's own keys
    config = {api_constants.TOPOLOGY_COMPONENT_PARALLELISM: str(par), **_config(f"config of {where}",
                                                                                 spec.custom_config)}
    # a class that knows its state cannot be split (a window, staged writes) says so once, for
    # every topology that uses it; the component's own config still wins
    declared = getattr(cls, "heron_state_rescale", None)
    if isinstance(declared, str):
        config.setdefault(STATE_RESCALE.name, declared)
    return ComponentDef(
        name=str(spec.name),
        kind=ComponentKind.SPOUT if spec.is_spout else ComponentKind.BOLT,
        class_ref=_pickle_class(where, cls),
        class_name=f"{cls.__module__}:{cls.__qualname__}",
        par=par,
        inputs=_inputs(where, spec.inputs),
        outputs=_stream_defs(where, spec.outputs if spec.outputs is not None else []),
        config=config,
    )


def build_topology(name: str, specs: Iterable[HeronComponentSpec], config: Mapping[str, Any]) -> TopologyDef:
    """The plan of these specs, in order. Structure (names, inputs, fields) is checked later,
    by heron_py.planner.logical.validate; this only refuses what cannot be serialized."""
    check_topology_name(name)
    return TopologyDef(name=name, components=tuple(component_def(s) for s in specs),
                       config=_config(f"config of topology '{name}'", config))


def _check_component_name(topology: str, name: Any, seen: Mapping[str, Any]) -> None:
    where = f"topology '{topology}'"
    if not isinstance(name, str):
        raise TopologyError(f"{where}: a component has no name; expected a str name, found {name!r}")
    if not _NAME.match(name):
        raise TopologyError(f"{where}: component name {name!r} is not valid: {_NAME_RULE}")
    if name == "config":
        raise TopologyError(f"{where}: component name 'config' is reserved (it holds the topology config)")
    if name in seen:
        raise TopologyError(f"{where}: component name '{name}' is used twice; component names must be unique")


class TopologyBuilder:
    """heronpy's builder: add_spout / add_bolt / add_spec, set_config, build_and_submit."""

    def __init__(self, name: str) -> None:
        check_topology_name(name)
        self.topology_name = name
        self._specs: dict[str, HeronComponentSpec] = {}
        self._topology_config: dict[str, Any] = {}

    def add_spec(self, *specs: HeronComponentSpec) -> None:
        for spec in specs:
            if not isinstance(spec, HeronComponentSpec):
                raise TypeError(f"add_spec takes HeronComponentSpec objects (Spout.spec(), Bolt.spec()), "
                                f"found {spec!r}")
            _check_component_name(self.topology_name, spec.name, self._specs)
            assert spec.name is not None
            self._specs[spec.name] = spec

    def add_spout(self, name: str, spout_cls: Any, par: int, config: dict[str, Any] | None = None,
                  optional_outputs: list[Any] | None = None) -> HeronComponentSpec:
        spec: HeronComponentSpec = spout_cls.spec(name=name, par=par, config=config,
                                                  optional_outputs=optional_outputs)
        self.add_spec(spec)
        return spec

    def add_bolt(self, name: str, bolt_cls: Any, par: int, inputs: Any, config: dict[str, Any] | None = None,
                 optional_outputs: list[Any] | None = None) -> HeronComponentSpec:
        spec: HeronComponentSpec = bolt_cls.spec(name=name, inputs=inputs, par=par, config=config,
                                                 optional_outputs=optional_outputs)
        self.add_spec(spec)
        return spec

    def set_config(self, config: dict[str, Any]) -> None:
        if not isinstance(config, dict):
            raise TypeError(f"set_config takes a dict, found {type(config).__name__}")
        self._topology_config = dict(config)

    def build(self) -> TopologyDef:
        """heron-py's addition: the plan, without submitting it."""
        return build_topology(self.topology_name, self._specs.values(), self._topology_config)

    def build_and_submit(self) -> None:
        """Hands the plan to ``heron-py submit`` (see heron_py.api.submit_hook)."""
        submit_hook.submit(self.build())


_defined: list[type] = []


def heron_options(raw: str | None = None) -> dict[str, str]:
    """heronpy's ``HERON_OPTIONS`` environment variable: ``key=value`` pairs joined by ',' with
    '%%%%' standing for a space. Unset is no options (heron-py's CLI does not need it)."""
    text = os.environ.get("HERON_OPTIONS") if raw is None else raw
    options: dict[str, str] = {}
    for part in (text or "").replace("%%%%", " ").split(","):
        if not part:
            continue
        key, sep, value = part.partition("=")
        if not sep:
            raise TopologyError(f"HERON_OPTIONS: part {part!r} is not key=value")
        options[key] = value
    return options


def defined_topologies() -> list[type]:
    """Topology subclasses defined so far, oldest first (the CLI picks those its file defined)."""
    return list(_defined)


class TopologyType(type):
    """Collects a Topology subclass's HeronComponentSpec attributes (a spec without a name is
    named after its attribute) and registers the class for the CLI. Nothing is submitted
    here: ``heron-py submit`` runs the file and builds the class it finds."""

    # heronpy's topology defaults, for reference; heron-py's runtime applies its own defaults
    # for missing keys, so they are not copied into every plan.
    DEFAULT_TOPOLOGY_CONFIG: dict[str, str] = {
        api_constants.TOPOLOGY_DEBUG: "false",
        api_constants.TOPOLOGY_STMGRS: "1",
        api_constants.TOPOLOGY_MESSAGE_TIMEOUT_SECS: "30",
        api_constants.TOPOLOGY_COMPONENT_PARALLELISM: "1",
        api_constants.TOPOLOGY_MAX_SPOUT_PENDING: "100",
        api_constants.TOPOLOGY_RELIABILITY_MODE: api_constants.TopologyReliabilityMode.ATMOST_ONCE.value,
        api_constants.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: "true",
    }

    def __new__(mcs, classname: str, bases: tuple[type, ...], class_dict: dict[str, Any]) -> TopologyType:
        cls = super().__new__(mcs, classname, bases, class_dict)
        if any(isinstance(b, TopologyType) for b in bases):  # a user's topology, not the base
            specs: dict[str, HeronComponentSpec] = {}
            for attr, value in class_dict.items():
                if isinstance(value, HeronComponentSpec):
                    if value.name is None:
                        value.name = attr
                    _check_component_name(classname, value.name, specs)
                    specs[value.name] = value
            cls._specs = specs  # type: ignore[attr-defined]
            _defined.append(cls)
        return cls


class Topology(metaclass=TopologyType):
    """Class-style topology: component specs and an optional ``config`` dict as class
    attributes. The topology's name is the class name unless ``build(name)`` says otherwise."""

    config: dict[str, Any] = {}
    _specs: dict[str, HeronComponentSpec] = {}

    @classmethod
    def build(cls, name: str | None = None) -> TopologyDef:
        if cls is Topology:
            raise TypeError("the Topology base class has no components: subclass it")
        # heronpy's order: the name given, HERON_OPTIONS' cmdline.topology.name, the class name
        name = name or heron_options().get("cmdline.topology.name") or cls.__name__
        return build_topology(name, cls._specs.values(), dict(cls.config or {}))

    @classmethod
    def build_and_submit(cls) -> None:
        submit_hook.submit(cls.build())
