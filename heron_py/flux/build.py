"""A merged FluxDef → TopologyDef, through heron-py's TopologyBuilder and validator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from heron_py.api.component.component_spec import GlobalStreamId
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.flux.classes import make_component, make_object
from heron_py.flux.errors import FluxError
from heron_py.flux.makers import Context
from heron_py.flux.model import FluxDef, StreamSpec
from heron_py.flux.storm_config import translate_config
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate
from heron_py.planner.model import GroupingDef, TopologyDef

_SIMPLE = {"SHUFFLE": Grouping.SHUFFLE, "ALL": Grouping.ALL, "GLOBAL": Grouping.GLOBAL, "NONE": Grouping.NONE,
           "DIRECT": Grouping.DIRECT, "LOCAL_OR_SHUFFLE": Grouping.LOCAL_OR_SHUFFLE}


def _grouping(ctx: Context, stream: StreamSpec) -> GroupingDef:
    g = stream.grouping
    if g.type in _SIMPLE:
        return _SIMPLE[g.type]
    if g.type == "FIELDS":
        assert g.args  # the model refuses FIELDS without args
        return Grouping.fields(list(g.args))
    assert g.custom_class is not None  # CUSTOM: the model requires customClass
    grouper = make_object(g.custom_class, ctx)
    if not callable(getattr(grouper, "choose_tasks", None)):
        raise ctx.err(g.custom_class.where, f"className '{g.custom_class.class_name}': expected an "
                                            f"ICustomGrouping (with choose_tasks), found {type(grouper).__name__}")
    try:
        return Grouping.custom(grouper)
    except TopologyError as e:
        raise ctx.err(g.custom_class.where, str(e)) from e


def _inputs(ctx: Context, flux: FluxDef) -> dict[str, dict[GlobalStreamId, GroupingDef]]:
    """Each bolt's inputs from the file's streams; a stream between ids that do not exist is
    refused here, naming the stream."""
    known = sorted([*flux.spouts, *flux.bolts])
    out: dict[str, dict[GlobalStreamId, GroupingDef]] = {b: {} for b in flux.bolts}
    for s in flux.streams:
        if s.source not in flux.spouts and s.source not in flux.bolts:
            raise ctx.err(s.where, f"from '{s.source}': no spout or bolt has id '{s.source}'; expected one of "
                                   f"{known}")
        if s.target not in flux.bolts:
            what = "is a spout, which takes no input" if s.target in flux.spouts else "no bolt has that id"
            raise ctx.err(s.where, f"to '{s.target}': {what}; expected one of {sorted(flux.bolts)}")
        key = GlobalStreamId(s.source, s.grouping.stream_id)
        if key in out[s.target]:
            raise ctx.err(s.where, f"subscribes bolt '{s.target}' to '{s.source}' stream '{s.grouping.stream_id}' "
                                   f"a second time; expected one stream per (from, to, streamId)")
        out[s.target][key] = _grouping(ctx, s)
    return out


def build_topology(flux: FluxDef, file: str, base_dir: Path) -> TopologyDef:
    prefix = f"flux file {file}"
    if flux.name is None:
        raise FluxError(f"{prefix}: key 'name' is missing; expected the topology's name")
    objects: dict[str, Any] = {}
    ctx = Context(file, base_dir, objects)
    for oid, comp in flux.components.items():
        objects[oid] = make_object(comp, ctx)  # in file order: later ones may ref earlier ones
    inputs = _inputs(ctx, flux)
    try:
        builder = TopologyBuilder(flux.name)
        for spout in flux.spouts.values():
            builder.add_spec(make_component(spout, ctx, None, True))
        for bolt in flux.bolts.values():
            builder.add_spec(make_component(bolt, ctx, inputs[bolt.id], False))
        builder.set_config(translate_config(file, flux.config))
        topology = builder.build()
        validate(topology)  # here too, so a structural error names the Flux file
    except FluxError:
        raise
    except TopologyError as e:
        raise FluxError(f"{prefix}: {e}") from e
    return topology
