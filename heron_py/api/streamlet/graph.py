"""Compiling a Streamlet graph into TopologyBuilder components: order, names, config."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from heron_py.api.component.component_spec import GlobalStreamId
from heron_py.api.stream import Grouping
from heron_py.api.streamlet import chain, combine, functions, groupings, keyed
from heron_py.api.streamlet import components as comp
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.streamlet.stage import shuffle
from heron_py.api.streamlet.streamlet import PARTITIONER, Streamlet
from heron_py.api.topology import TopologyBuilder
from heron_py.common.config import STREAMLET_FUSION
from heron_py.planner.model import TopologyDef


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


# between the streamlet names in a fused component's name, as Flink's " -> " is between a
# chain's operators: a component name allows letters, digits, '.', '_' and '-' only (it names
# log, capture and checkpoint files, and URLs of the web page), and heronpy's default names
# hold single '-' ("flatmap-1"), so a doubled '_' stands out as the boundary between two names
FUSED_SEPARATOR = "__"
# a longer fused name keeps the names of its first two and its last streamlet and counts the
# ones between ("generator-1__flatmap-1__3-more__consume-1"): the name goes into file names, one
# per task ("<component>-<task>.log"), which a file system caps at 255 bytes
MAX_FUSED_NAME = 120
# the operator kind (chain.py) of each streamlet bolt that a fused task can run
_KINDS: dict[type, str] = {
    comp.MapBolt: chain.MAP, comp.FlatMapBolt: chain.FLATMAP, comp.FilterBolt: chain.FILTER,
    comp.PassBolt: chain.PASS, comp.ConsumeBolt: chain.CONSUME, comp.LogBolt: chain.LOG, comp.SinkBolt: chain.SINK,
}
# the ones that may run behind another operator in its task: element-wise, stateless, and
# reading their input by shuffle (no partitioning of their own to keep)
_FOLLOWERS = frozenset((chain.MAP, chain.FLATMAP, chain.FILTER, *chain.TAIL_KINDS))
# the sources whose spout runs the element operators fused behind it (SourceSpout): only
# map, flat_map and filter; a consume, log or sink keeps a bolt of its own
_SOURCES = (comp.GeneratorSpout, comp.SupplierSpout)
_SOURCE_FOLLOWERS = frozenset(chain.ELEMENT_KINDS)


def _fuses_into_parent(s: Streamlet, head: Streamlet | None = None) -> bool:
    """Whether ``s`` can run in its parent's task, on the elements the parent produced there.

    Safe exactly when the unfused edge promised nothing a same-task hand-over breaks: ``s`` is
    a stateless element operator reading by shuffle (so any task of ``s`` may get any element),
    with the parent's parallelism, and it is the parent's only reader (a parent read by
    several streamlets, as clone() makes, gives each of them every element: each keeps its own
    task). Behind a source (its spout) only map, flat_map and filter fuse, on the same terms:
    with the source's parallelism, each source task's elements are then transformed in that
    task instead of being shuffled to one of as many tasks, which the shuffle allowed. Nothing
    fuses into a union from its parents (a union reads two streamlets). ``head`` is the first
    streamlet of the parent's task (the parent itself when not given)."""
    kind = _KINDS.get(s._stage.component)
    if kind not in _FOLLOWERS or s._stage.grouping is not shuffle or len(s._parents) != 1:
        return False
    p = s._parents[0]
    if len(p._children) != 1 or p._num_partitions != s._num_partitions:
        return False
    if (head or p)._stage.component in _SOURCES:
        return kind in _SOURCE_FOLLOWERS
    pkind = _KINDS.get(p._stage.component)
    return pkind is not None and pkind not in chain.TAIL_KINDS


def fuse(streamlets: Sequence[Streamlet]) -> list[list[Streamlet]]:
    """The streamlets (in order) grouped into the tasks they run in: each group is a head and
    the streamlets fused behind it, in chain order."""
    groups: list[list[Streamlet]] = []
    group_of: dict[int, list[Streamlet]] = {}
    for s in streamlets:
        g = group_of.get(id(s._parents[0])) if s._parents else None
        if g is not None and _fuses_into_parent(s, g[0]):
            g.append(s)
        else:
            g = [s]
            groups.append(g)
        group_of[id(s)] = g
    return groups


def component_name(group: Sequence[Streamlet]) -> str:
    """The component name of a group of fused streamlets (``fuse``): their names joined by
    ``FUSED_SEPARATOR`` in chain order, or, past ``MAX_FUSED_NAME`` characters, the first two,
    how many more, and the last. A streamlet alone keeps its own name."""
    names = [str(s._name) for s in group]
    full = FUSED_SEPARATOR.join(names)
    if len(names) <= 3 or len(full) <= MAX_FUSED_NAME:
        return full
    return FUSED_SEPARATOR.join([names[0], names[1], f"{len(names) - 3}-more", names[-1]])


def fused_component(topology: TopologyDef, name: str) -> str | None:
    """The component that runs streamlet ``name`` fused with others (``fuse``), when no
    component bears that name itself; None otherwise. A fused component's config lists its
    operators' streamlets (``FUSED_NAMES``); a spout's list leaves out the source, whose name
    heads the component's."""
    if any(c.name == name for c in topology.components):
        return None
    for c in topology.components:
        listed = c.config.get(comp.FUSED_NAMES)  # a plain string, as built and as sanitized
        if not isinstance(listed, str):
            continue
        names = listed.split(",")
        if name in names or (not c.inputs and c.name.startswith(f"{name}{FUSED_SEPARATOR}{names[0]}")):
            return c.name
    return None


def fused_name_error(topology: TopologyDef, what: str, name: str) -> str | None:
    """The error for ``name`` given where a component is expected (a capture, a fault) when it
    is a streamlet fused into another component: it receives nothing of its own, so the
    mistake would otherwise pass in silence. None when ``name`` is no such streamlet."""
    fused = fused_component(topology, name)
    if fused is None:
        return None
    return (f"{what} '{name}': topology '{topology.name}' has no component of that name; streamlet '{name}' runs "
            f"fused in component '{fused}' (Streamlet fusion is on by default): expected '{fused}' (what its "
            f"first streamlet receives), or the topology built with config.set_fusion(False) for a component "
            f"per streamlet")


def _packed(s: Streamlet) -> tuple[str, dict[str, bytes]]:
    """How errors name ``s``, and its stage's objects (functions, a generator, a sink) packed."""
    where = f"streamlet '{s._name}' ({s._stage.prefix})"
    return where, {key: functions.pack(where, obj) for key, obj in s._stage.objects.items()}


@dataclass(frozen=True)
class Combiner:
    """A count_by_key whose input a source's task counts per batch first (combine.py), and the
    repartition between them, if one is (its task forwards what the source's task counted)."""

    count: Streamlet
    through: Streamlet | None = None

    @property
    def partitioned(self) -> bool:
        """Whether the source's task routes by the repartition's function: (key, count,
        partition) triples then, not (key, count) pairs."""
        return self.through is not None and PARTITIONER in self.through._stage.objects


def _only_reader(s: Streamlet) -> Streamlet | None:
    """The one streamlet reading ``s`` and nothing else, or None."""
    if len(s._children) != 1:
        return None
    c = s._children[0]
    return c if len(c._parents) == 1 else None


def combiners(groups: Sequence[list[Streamlet]]) -> dict[int, Combiner]:
    """The count_by_key streamlets whose input a source's task counts per batch first
    (combine.count_keys), by the id of the last streamlet of that task: a count_by_key emitting
    on ticks or at the end (never per element) that is the only reader of a source's task, or
    of a repartition (alone in its task: nothing fused behind it) that is the only reader of a
    source's task."""
    alone = {id(g[0]) for g in groups if len(g) == 1}
    out: dict[int, Combiner] = {}
    for g in groups:
        last = g[-1]
        c = _only_reader(last) if g[0]._stage.component in _SOURCES else None
        through = None
        if c is not None and c._stage.component is comp.PassBolt and c._stage.prefix == "repartition" \
                and id(c) in alone:
            through, c = c, _only_reader(c)
        if (c is not None and c._stage.component is keyed.CountByKeyBolt
                and c._stage.settings.get(keyed.EMIT) in (keyed.EMIT_TICK, keyed.EMIT_FINAL)):
            out[id(last)] = Combiner(c, through)
    return out


def _combiner_config(c: Combiner) -> dict[str, Any]:
    """What the source's task needs to count for ``c``: the count_by_key's key function and its
    name as the counting bolt's own error lines give it; the repartition's function, task
    count and name, when it has a function."""
    _where, packed = _packed(c.count)
    out: dict[str, Any] = {combine.COMBINE_KEY_FUNCTION: packed[keyed.KEY_FUNCTION],
                           combine.COMBINE_WHERE: keyed.CountByKeyBolt.where_of(str(c.count._name))}
    if c.count._stage.settings.get(keyed.EMIT) == keyed.EMIT_TICK:
        tick = float(c.count._stage.settings.get(keyed.TICK_SECS, keyed.DEFAULT_TICK_SECS))
        out[combine.COMBINE_MAX_BATCH_S] = tick / 4
    if c.partitioned:
        assert c.through is not None
        where, rep = _packed(c.through)
        out.update({combine.COMBINE_PARTITIONER: rep[PARTITIONER],
                    combine.COMBINE_PARTITIONS: c.through._num_partitions, combine.COMBINE_PARTITIONER_WHERE: where})
    return out


def _add(bldr: TopologyBuilder, s: Streamlet, component_of: dict[int, str], extra: dict[str, Any],
         combined: Combiner | None = None) -> None:
    name = str(s._name)
    stage = s._stage
    where, packed = _packed(s)
    config: dict[str, Any] = {**stage.settings, **packed, **extra}
    if stage.grouping is None:
        bldr.add_spout(name, stage.component, par=s._num_partitions, config=config)
        return
    if combined is not None and combined.count is s:
        # (key, count[, partition]) from the combiner: routed by that key, to the task key_fn's would reach
        config[combine.COMBINED] = True
        by_key = groupings.CombinedKeyGrouping if combined.partitioned else groupings.KeyGrouping
        grouping = Grouping.custom(by_key(where))
    elif combined is not None and combined.partitioned:  # the repartition between: partitioned at the source
        grouping = Grouping.custom(groupings.PartitionIndexGrouping(where))
    else:
        grouping = stage.grouping(where, packed)
    parents = [component_of[id(p)] for p in s._parents]
    inputs = {GlobalStreamId(p, comp.OUTPUT_STREAM): grouping for p in parents}
    config[comp.PARENTS] = ",".join(parents)
    bldr.add_bolt(name, stage.component, par=s._num_partitions, inputs=inputs, config=config)


def _add_fused(bldr: TopologyBuilder, group: list[Streamlet], component_of: dict[int, str],
               extra: dict[str, Any]) -> None:
    """One component for the group, named after its streamlets ("flatmap-1__map-1"): a bolt
    reading what the head read the way the head read it, or, headed by a source, the source's
    spout running the rest. Each fused operator's function is in its config."""
    head = group[0]
    name = component_name(group)
    first_op = 0 if head._stage.grouping is not None else 1  # a source is no chain operator
    ops = group[first_op:]
    config: dict[str, Any] = {comp.FUSED_KINDS: ",".join(_KINDS[s._stage.component] for s in ops),
                              comp.FUSED_NAMES: ",".join(str(s._name) for s in ops), **extra}
    packed = [_packed(s) for s in group]  # each streamlet's, in group order
    for i, (s, (_where, fns)) in enumerate(zip(ops, packed[first_op:], strict=True)):
        fn = fns.get(comp.FUNCTION, fns.get(comp.SINK))
        if fn is not None and _KINDS[s._stage.component] != chain.PASS:
            config[f"{comp.FUSED_FUNCTION_PREFIX}{i}"] = fn
    head_where, head_packed = packed[0]
    if head._stage.grouping is None:
        bldr.add_spout(name, head._stage.component, par=head._num_partitions,
                       config={**head._stage.settings, **head_packed, **config})
        return
    grouping = head._stage.grouping(head_where, head_packed)
    parents = [component_of[id(p)] for p in head._parents]
    config[comp.PARENTS] = ",".join(parents)
    ends = _KINDS[group[-1]._stage.component] in chain.TAIL_KINDS
    bldr.add_bolt(name, comp.FusedSinkBolt if ends else comp.FusedBolt, par=head._num_partitions,
                  inputs={GlobalStreamId(p, comp.OUTPUT_STREAM): grouping for p in parents}, config=config)


def add_to(bldr: TopologyBuilder, sources: Sequence[Streamlet], *, fusion: bool = True) -> None:
    """Adds a component per group of streamlets that run in one task (``fuse``) and the
    count_by_key combiners (``combiners``), or without ``fusion`` a component per streamlet.
    Each source's spout holds ``streamlet.fusion`` as built (common/config.py
    check_streamlet_fusion compares it with the topology's at submit)."""
    if not sources:
        raise StreamletError("Builder has no sources: add one with builder.new_source(...) before running it")
    streamlets = ordered(sources)
    assign_names(streamlets)
    groups = fuse(streamlets) if fusion else [[s] for s in streamlets]
    component_of: dict[int, str] = {}
    for g in groups:
        name = component_name(g)
        for s in g:
            component_of[id(s)] = name
    combining = combiners(groups) if fusion else {}
    combined = {id(s): c for c in combining.values() for s in (c.count, c.through) if s is not None}
    for g in groups:
        c = combining.get(id(g[-1]))
        extra = _combiner_config(c) if c is not None else {}
        if g[0]._stage.is_source:
            extra[STREAMLET_FUSION.name] = fusion
        if len(g) == 1:
            _add(bldr, g[0], component_of, extra, combined=combined.get(id(g[0])))
        else:
            _add_fused(bldr, g, component_of, extra)
