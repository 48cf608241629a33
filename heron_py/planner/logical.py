"""Checks of the logical plan at submit. Each error is one message: what, where, expected, found.

"Cycles of spouts" (the issue's words) is read as: spouts take no input, and every bolt must
descend from some spout — a bolt with no inputs, or a cycle of bolts that no spout feeds,
would never receive a tuple and is refused. Cycles among bolts that a spout does feed are
allowed, as in Storm.

Direct grouping: a bolt may subscribe with ``Grouping.DIRECT`` only to a stream declared
``Stream(..., direct=True)``, and a direct stream only with ``Grouping.DIRECT`` — the emitter
names the task, so any other grouping on it would be ignored silently. (heronpy refused
direct streams altogether; Storm checks the same pairing.)

A spout must declare at least one output stream (heronpy refused such a spout too).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from heron_py.common.config import SERIALIZER, ConfigError, check_topology_config
from heron_py.common.serializer_loader import load_serializer
from heron_py.planner.errors import TopologyError
from heron_py.planner.keygroups import max_parallelism
from heron_py.planner.model import ComponentDef, ComponentKind, GroupingKind, TopologyDef
from heron_py.planner.requirements import check_requirements
from heron_py.planner.sinks import check_exact_sinks

_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def check_topology_name(name: Any) -> None:
    """One rule for every way a name comes in (a builder, --name, a Flux file, the CLI's
    commands): the name is a folder and a file name on every host."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise TopologyError(f"topology name {name!r} is not valid: expected letters, digits, '.', '_' or '-'")
    if name.startswith((".", "-")):
        # "." and ".." would point at the parent folder; a leading dot hides the topology; a
        # leading "-" is read as an option by every command the name is passed to (the page runs
        # heron-py kill NAME)
        raise TopologyError(f"topology name {name!r} is not valid: it starts with {name[0]!r}; expected a name that "
                            f"starts with a letter, digit or '_'")


def _check_key_groups(topology: TopologyDef, c: ComponentDef, where: str) -> None:
    """A fields grouping sends each key group to one task: more tasks than groups would idle."""
    try:
        groups = max_parallelism(topology.config, c.config, c.par) if isinstance(c.par, int) else None
    except ConfigError as e:
        raise TopologyError(f"{where}: {c.kind.value} '{c.name}': {e}") from None
    if groups is not None and c.par > groups:
        raise TopologyError(f"{where}: {c.kind.value} '{c.name}' has parallelism {c.par}; expected at most its "
                            f"topology.component.max.parallelism ({groups}), its number of key groups")


def validate(topology: TopologyDef) -> None:
    name = topology.name
    check_topology_name(name)
    where = f"topology '{name}'"
    comps = {}
    for c in topology.components:
        if c.name in comps:
            raise TopologyError(f"{where}: component name '{c.name}' is used twice; component names must be unique")
        if not c.name or not _NAME.match(c.name):
            raise TopologyError(f"{where}: component name {c.name!r} is not valid: expected letters, digits, "
                                f"'.', '_' or '-'")
        comps[c.name] = c
    if not any(c.kind is ComponentKind.SPOUT for c in topology.components):
        raise TopologyError(f"{where}: has no spout; expected at least one")
    check_requirements(topology)  # an optional dependency not installed: one line saying what to install
    check_exact_sinks(topology)  # effectively once: a sink that would write replays twice
    for c in topology.components:
        kind = c.kind.value
        if isinstance(c.par, bool) or not isinstance(c.par, int) or c.par < 1:
            raise TopologyError(f"{where}: {kind} '{c.name}' has parallelism {c.par!r}; expected an integer >= 1")
        if c.kind is ComponentKind.SPOUT and not c.outputs:
            raise TopologyError(f"{where}: spout '{c.name}' declares no output streams; expected at least one "
                                f"(outputs = [...] on {c.class_name})")
        if c.kind is ComponentKind.SPOUT and c.inputs:
            raise TopologyError(f"{where}: spout '{c.name}' has inputs ({', '.join(i.component for i in c.inputs)}); "
                                f"spouts take no input")
        _check_key_groups(topology, c, where)
        for inp in c.inputs:
            src = comps.get(inp.component)
            if src is None:
                raise TopologyError(f"{where}: {kind} '{c.name}' takes input from '{inp.component}', which is not "
                                    f"a component of this topology (components: {sorted(comps)})")
            stream = src.output(inp.stream)
            if stream is None:
                raise TopologyError(
                    f"{where}: {kind} '{c.name}' takes input from '{inp.component}' stream '{inp.stream}', which "
                    f"'{inp.component}' does not declare (declared streams: {sorted(s.name for s in src.outputs)})")
            g = inp.grouping
            if g.kind in (GroupingKind.FIELDS, GroupingKind.PARTIAL_KEY):
                for f in g.fields:
                    if f not in stream.fields:
                        raise TopologyError(
                            f"{where}: {kind} '{c.name}' input from '{inp.component}' stream '{inp.stream}' groups "
                            f"on field '{f}', which that stream does not declare "
                            f"(declared fields: {list(stream.fields)})")
            if g.kind is GroupingKind.DIRECT and not stream.direct:
                raise TopologyError(
                    f"{where}: {kind} '{c.name}' subscribes to '{inp.component}' stream '{inp.stream}' with direct "
                    f"grouping, but that stream is not declared direct (expected Stream(..., direct=True))")
            if g.kind is not GroupingKind.DIRECT and stream.direct:
                raise TopologyError(
                    f"{where}: {kind} '{c.name}' subscribes to direct stream '{inp.stream}' of '{inp.component}' "
                    f"with {g.kind.value} grouping; a direct stream needs Grouping.DIRECT")
    # every bolt must descend from a spout
    reached = {c.name for c in topology.components if c.kind is ComponentKind.SPOUT}
    changed = True
    while changed:
        changed = False
        for c in topology.components:
            if c.name not in reached and any(i.component in reached for i in c.inputs):
                reached.add(c.name)
                changed = True
    orphans = sorted(c.name for c in topology.components if c.name not in reached)
    if orphans:
        raise TopologyError(f"{where}: bolts {orphans} are not reachable from any spout (no inputs, or a cycle "
                            f"that no spout feeds); every bolt must descend from a spout")
    # the engine's keys, parsed as the daemons will parse them: a bad value fails here, at submit
    try:
        check_topology_config(topology.config, {c.name: c.config for c in topology.components})
        _check_serializer(topology.config)
    except ConfigError as e:
        raise TopologyError(f"{where}: {e}") from None


def _check_serializer(config: Mapping[str, Any]) -> None:
    """A serializer class that cannot be loaded is refused at submit, not in every container."""
    name = SERIALIZER.parse(config)
    if name:
        try:
            load_serializer(name)
        except ValueError as e:
            raise ConfigError(str(e)) from None
