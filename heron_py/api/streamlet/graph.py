"""Compiling a Streamlet graph into TopologyBuilder components: order, names, config."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from heron_py.api.component.component_spec import GlobalStreamId
from heron_py.api.streamlet import components as comp
from heron_py.api.streamlet import functions
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.streamlet.streamlet import Streamlet
from heron_py.api.topology import TopologyBuilder


def ordered(sources: Sequence[Streamlet]) -> list[Streamlet]:
    """Every streamlet reachable from ``sources``, each after all its parents; otherwise in
    depth-first order of creation (as heronpy built them, so default names come out alike)."""
    reachable: list[Streamlet] = []
    seen: set[int] = set()
    todo = list(reversed(sources))
    while todo:
        s = todo.pop()
        if id(s) not in seen:
            seen.add(id(s))
            reachable.append(s)
            todo.extend(reversed(s._children))
    for s in reachable:
        for p in s._parents:
            if id(p) not in seen:
                raise StreamletError(f"{s._label()} ({s._stage.prefix}) reads {p._label()}, which does not come "
                                     f"from this Builder's sources; expected every streamlet of a topology to "
                                     f"start at one Builder's new_source()")
    out: list[Streamlet] = []
    done: set[int] = set()
    while len(out) < len(reachable):
        for s in reachable:
            if id(s) not in done and all(id(p) in done for p in s._parents):
                done.add(id(s))
                out.append(s)
    return out


def assign_names(streamlets: Sequence[Streamlet]) -> None:
    """Names set with set_name are kept (each once); the others get heronpy's default,
    "<operator>-<n>" with the lowest n not taken."""
    used: set[str] = set()
    for s in streamlets:
        if s._name is not None:
            if s._name in used:
                raise StreamletError(f"streamlet name '{s._name}' is used by two streamlets; expected unique "
                                     f"names (set_name)")
            used.add(s._name)
    for s in streamlets:
        if s._name is None:
            n = 1
            while f"{s._stage.prefix}-{n}" in used:
                n += 1
            s._name = f"{s._stage.prefix}-{n}"
            used.add(s._name)


def _add(bldr: TopologyBuilder, s: Streamlet) -> None:
    name = str(s._name)
    stage = s._stage
    where = f"streamlet '{name}' ({stage.prefix})"
    packed = {key: functions.pack(where, obj) for key, obj in stage.objects.items()}
    config: dict[str, Any] = {**stage.settings, **packed}
    if stage.grouping is None:
        bldr.add_spout(name, stage.component, par=s._num_partitions, config=config)
        return
    grouping = stage.grouping(where, packed)
    inputs = {GlobalStreamId(str(p._name), comp.OUTPUT_STREAM): grouping for p in s._parents}
    config[comp.PARENTS] = ",".join(str(p._name) for p in s._parents)
    bldr.add_bolt(name, stage.component, par=s._num_partitions, inputs=inputs, config=config)


def add_to(bldr: TopologyBuilder, sources: Sequence[Streamlet]) -> None:
    if not sources:
        raise StreamletError("Builder has no sources: add one with builder.new_source(...) before running it")
    streamlets = ordered(sources)
    assign_names(streamlets)
    for s in streamlets:
        _add(bldr, s)
