"""streamparse's Topology DSL → heron-py's TopologyDef.

streamparse's ``TopologyType`` metaclass has already checked the class when the topology
file defined it (names, that bolts have inputs and spouts outputs, grouping fields) and left
``cls.specs``: one ``ShellBoltSpec``/``ShellSpoutSpec``/``Java*Spec`` per component, with
``inputs`` {thrift GlobalStreamId(componentId: str, streamId): thrift Grouping}, ``outputs``
{stream: StreamInfo(output_fields, direct)}, ``par`` and ``config`` (a JSON string). Each spec
becomes a ``HeronComponentSpec`` added to a ``TopologyBuilder``:

- a Python component (a pystorm Bolt/Spout subclass, what ``Bolt.spec()`` makes) runs natively
  (heron_py.storm.native) or, with ``heron_py.pystorm.mode: subprocess``, as streamparse runs
  it on Storm: ``python -m streamparse.run module.Class`` through heron_py.api.shell;
- a ``ShellBolt``/``ShellSpout`` spec (command + script) runs its command through
  heron_py.api.shell;
- a ``JavaBolt``/``JavaSpout`` spec is refused: heron-py runs Python components only.

Storm's config meanings kept: acking is on unless ``topology.acker.executors`` is 0 (Storm's
default; spouts that emit without an id stay untracked), and ``topology.workers`` gives the
number of containers when ``topology.stmgrs`` is not set.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from heron_py.api import api_constants
from heron_py.api.component.component_spec import GlobalStreamId, HeronComponentSpec
from heron_py.api.stream import Grouping, Stream
from heron_py.api.topology import TopologyBuilder
from heron_py.planner.errors import TopologyError
from heron_py.planner.model import GroupingDef, TopologyDef
from heron_py.storm import CLASS_KEY, ENV_VAR, MODE_KEY, MODE_NATIVE, MODE_SUBPROCESS
from heron_py.storm.project import Project, find_project

_SIMPLE_GROUPINGS = {
    "shuffle": Grouping.SHUFFLE,
    "all": Grouping.ALL,
    "none": Grouping.NONE,
    "direct": Grouping.DIRECT,
    "local_or_shuffle": Grouping.LOCAL_OR_SHUFFLE,
}


def streamparse_topologies(namespace: Mapping[str, Any], topology_file: Path,
                           overrides: Mapping[str, Any] | None = None) -> list[TopologyDef]:
    """The streamparse Topology classes the topology file itself defined (not imported ones),
    translated; [] when the file did not use streamparse. ``overrides``: the submit's
    --config-property values, over the class's config."""
    if "streamparse.dsl.topology" not in sys.modules:
        return []  # the file never imported streamparse: nothing to look for
    from streamparse.dsl.topology import Topology

    module = namespace.get("__name__", "__main__")
    classes = [v for v in namespace.values() if isinstance(v, type) and issubclass(v, Topology)
               and v is not Topology and v.__module__ == module]
    project = find_project(topology_file)
    return [translate(c, name=topology_file.stem, project=project, overrides=overrides) for c in classes]


def translate(topology_cls: Any, name: str | None = None, project: Project | None = None,
              overrides: Mapping[str, Any] | None = None) -> TopologyDef:
    """One streamparse Topology class → its plan. The name defaults to the class name
    (``sparse`` names a topology after its file: streamparse_topologies passes the file's stem).
    ``overrides`` (--config-property) set the topology-wide ``heron_py.pystorm.mode`` over the
    class's config, as they override the rest of its config at submit; a component's own
    config still decides for that component."""
    name = name or topology_cls.__name__
    where = f"streamparse topology '{name}'"
    raw_config = getattr(topology_cls, "config", None) or {}
    if not isinstance(raw_config, dict):
        raise TopologyError(f"{where}: config must be a dict, found {type(raw_config).__name__}")
    if overrides and MODE_KEY in overrides:
        default_mode = _mode(f"{where}: --config-property", overrides[MODE_KEY])
    else:
        default_mode = _mode(f"{where}: config", raw_config.get(MODE_KEY, MODE_NATIVE))
    builder = TopologyBuilder(name)
    shown: dict[str, str] = {}
    for spec in topology_cls.specs:
        heron_spec, label = _component(where, spec, default_mode, project)
        builder.add_spec(heron_spec)
        if label is not None:
            shown[str(spec.name)] = label
    builder.set_config(_topology_config(raw_config))
    topo = builder.build()
    # the plan shows the user's class, not the adapter that runs it
    return replace(topo, components=tuple(replace(c, class_name=shown.get(c.name, c.class_name))
                                          for c in topo.components))


def _topology_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    config = dict(raw)
    acking_set = api_constants.TOPOLOGY_RELIABILITY_MODE in config or api_constants.TOPOLOGY_ACKING in config
    if not acking_set:
        ackers = config.get("topology.acker.executors")
        off = ackers is not None and str(ackers) == "0"
        mode = api_constants.TopologyReliabilityMode.ATMOST_ONCE if off else \
            api_constants.TopologyReliabilityMode.ATLEAST_ONCE
        config[api_constants.TOPOLOGY_RELIABILITY_MODE] = mode.value
    if api_constants.TOPOLOGY_STMGRS not in config and "topology.workers" in config:
        config[api_constants.TOPOLOGY_STMGRS] = config["topology.workers"]
    return config


def _mode(where: str, value: Any) -> str:
    if value not in (MODE_NATIVE, MODE_SUBPROCESS):
        raise TopologyError(f"{where} {MODE_KEY} is {value!r}; expected '{MODE_NATIVE}' or '{MODE_SUBPROCESS}'")
    return str(value)


def _kind(where: str, spec: Any) -> bool:
    """True for a spout, False for a bolt; refuses Java components."""
    from streamparse.dsl.bolt import JavaBoltSpec, ShellBoltSpec
    from streamparse.dsl.spout import JavaSpoutSpec, ShellSpoutSpec

    if isinstance(spec, (JavaBoltSpec, JavaSpoutSpec)):
        kind = "JavaBolt" if isinstance(spec, JavaBoltSpec) else "JavaSpout"
        java = getattr(spec.component_object, "java_object", None)
        what = f" ({java.full_class_name})" if java is not None else " (serialized Java)"
        raise TopologyError(f"{where}: component '{spec.name}' is a {kind}{what}; heron-py runs Python "
                            f"components only (pystorm/streamparse Bolt and Spout classes, or "
                            f"ShellBolt/ShellSpout commands)")
    if isinstance(spec, ShellSpoutSpec):
        return True
    if isinstance(spec, ShellBoltSpec):
        return False
    raise TopologyError(f"{where}: component '{getattr(spec, 'name', None)}' is a {type(spec).__name__}; "
                        f"expected a streamparse Bolt/Spout/ShellBolt/ShellSpout spec")


def _component(where: str, spec: Any, default_mode: str, project: Project | None
               ) -> tuple[HeronComponentSpec, str | None]:
    is_spout = _kind(where, spec)
    kind = "spout" if is_spout else "bolt"
    cwhere = f"{where}: {kind} '{spec.name}'"
    config = _spec_config(cwhere, spec.config)
    par = _par(cwhere, spec.par, project)
    outputs = [Stream(list(info.output_fields or []), name=stream, direct=bool(info.direct))
               for stream, info in (spec.outputs or {}).items()]
    inputs = None if is_spout else {GlobalStreamId(str(g.componentId), str(g.streamId)): _grouping(cwhere, g, gr)
                                    for g, gr in (spec.inputs or {}).items()}
    cls = spec.component_cls
    if not _is_pystorm(cls):
        shell = spec.component_object.shell
        command = [str(shell.execution_command), *str(shell.script or "").split()]
        return _shell_spec(is_spout, command, outputs, inputs, par, config, str(spec.name),
                           project.serializer if project else "json"), None
    label = f"{cls.__module__}:{cls.__qualname__}"
    _check_class(cwhere, cls, is_spout)
    mode = _mode(f"{cwhere}: config", config.get(MODE_KEY, default_mode))
    if mode == MODE_SUBPROCESS:
        if cls.__module__ == "__main__":
            raise TopologyError(f"{cwhere}: class {cls.__qualname__} is defined in the topology file; "
                                f"{MODE_KEY} '{MODE_SUBPROCESS}' runs 'python -m streamparse.run module.Class', "
                                f"so expected the class in a module (e.g. under src/)")
        serializer = project.serializer if project else "json"
        command = [sys.executable, "-m", "streamparse.run", f"{cls.__module__}.{cls.__qualname__}", "-s", serializer]
        return _shell_spec(is_spout, command, outputs, inputs, par, config, str(spec.name), serializer), label
    from heron_py.storm.native import PystormBolt, PystormSpout

    config[CLASS_KEY] = label
    adapter = PystormSpout if is_spout else PystormBolt
    return HeronComponentSpec(str(spec.name), adapter, is_spout, par, inputs, outputs, config), label


def _is_pystorm(cls: Any) -> bool:
    import pystorm

    return isinstance(cls, type) and issubclass(cls, (pystorm.Bolt, pystorm.Spout))


def _check_class(where: str, cls: Any, is_spout: bool) -> None:
    import pystorm

    expected = pystorm.Spout if is_spout else pystorm.Bolt
    if not issubclass(cls, expected):
        raise TopologyError(f"{where}: class {cls.__qualname__} is not a pystorm {expected.__name__} subclass; "
                            f"expected one for a {'spout' if is_spout else 'bolt'}")
    if "<locals>" in cls.__qualname__:
        raise TopologyError(f"{where}: class {cls.__qualname__} is defined inside a function; define it at "
                            f"module level so every container can import it")
    if issubclass(cls, pystorm.TicklessBatchingBolt) and cls.__init__ is not pystorm.TicklessBatchingBolt.__init__:
        raise TopologyError(f"{where}: TicklessBatchingBolt subclass {cls.__qualname__} overrides __init__; "
                            f"the native adapter replaces its timer thread and cannot run a custom __init__: "
                            f"expected setup in initialize(), or config {{'{MODE_KEY}': '{MODE_SUBPROCESS}'}}")


def _shell_spec(is_spout: bool, command: list[str], outputs: list[Stream], inputs: Any, par: int,
                config: dict[str, Any], name: str, serializer: str) -> HeronComponentSpec:
    from heron_py.api import shell  # type: ignore[attr-defined,unused-ignore]

    spec: HeronComponentSpec
    if is_spout:
        spec = shell.ShellSpout.spec(command, outputs=outputs, par=par, config=config, name=name,
                                     serializer=serializer)
    else:
        spec = shell.ShellBolt.spec(command, outputs=outputs, inputs=inputs, par=par, config=config, name=name,
                                    serializer=serializer)
    return spec


def _spec_config(where: str, raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        value = json.loads(raw) if isinstance(raw, (str, bytes)) else raw
    except ValueError as e:
        raise TopologyError(f"{where}: config is not valid JSON ({e}): {raw!r}") from e
    if not isinstance(value, dict):
        raise TopologyError(f"{where}: config must be a dict, found {type(value).__name__}")
    return dict(value)


def _par(where: str, par: Any, project: Project | None) -> int:
    if not isinstance(par, dict):
        return par  # type: ignore[no-any-return]  # an int: streamparse checked it, the builder checks again
    env = os.environ.get(ENV_VAR)
    if env is None:
        names = project.env_names if project else []
        choices = [n for n in names if n in par] if names else list(par)
        if len(choices) == 1:
            env = choices[0]
    if env is None or env not in par:
        raise TopologyError(f"{where}: par is per environment ({sorted(par)}); expected ${ENV_VAR} naming "
                            f"one of them, found {env!r}")
    return par[env]  # type: ignore[no-any-return]


def _grouping(where: str, stream: Any, g: Any) -> GroupingDef:
    src = f"input from '{stream.componentId}' stream '{stream.streamId}'"
    fields = getattr(g, "fields", None)
    if fields is not None:
        # streamparse's GLOBAL is Storm's: a fields grouping with no fields
        return Grouping.fields(*fields) if fields else Grouping.GLOBAL
    for attr, grouping in _SIMPLE_GROUPINGS.items():
        if getattr(g, attr, None) is not None:
            return grouping
    if getattr(g, "custom_object", None) is not None or getattr(g, "custom_serialized", None) is not None:
        java = getattr(g.custom_object, "full_class_name", "serialized Java")
        raise TopologyError(f"{where}: {src} uses a Java custom grouping ({java}); heron-py runs Python "
                            f"groupings only: expected SHUFFLE, fields(...), GLOBAL, ALL, NONE, DIRECT or "
                            f"LOCAL_OR_SHUFFLE")
    raise TopologyError(f"{where}: {src} has grouping {g!r}; expected a streamparse Grouping")
