"""Batch planning, pure: the order bolts run in, and which task of a bolt gets a tuple.

The batch run routes with the streaming engine's own code (``instance.emitter.Emitter`` and
``heron_py.planner.grouping``) over the packing a one-container submit would make, so the
task a tuple reaches in batch mode is the task it would reach when streaming: fields by the
same stable hash into ``par`` partitions, global to the lowest task, all to every task,
shuffle/none/local-or-shuffle round robin, direct and custom to the task they choose.
A bolt task is one Spark partition: partition i runs the bolt's i-th task (task ids of a
component are sorted, as the streaming routers sort them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from heron_py.planner.errors import TopologyError
from heron_py.planner.model import ComponentKind, PackingPlan, PhysicalPlan, StmgrLocation, TopologyDef, TopologyState
from heron_py.planner.packing import round_robin


class BatchError(TopologyError):
    """A batch run's inputs, outputs or topology do not fit: reported as one line."""


@dataclass(frozen=True)
class BatchPlan:
    topology: TopologyDef
    packing: PackingPlan
    order: tuple[str, ...]  # bolts, each after every component it reads from

    def tasks_of(self, component: str) -> tuple[int, ...]:
        return self.packing.tasks_of(component)

    def spouts(self) -> list[str]:
        return [c.name for c in self.topology.components if c.kind is ComponentKind.SPOUT]

    def physical(self) -> PhysicalPlan:
        """The running plan a host of this packing gets: one container, no real stream manager."""
        return PhysicalPlan(self.topology, self.packing, (StmgrLocation(0, "batch", 0, 0),), TopologyState.RUNNING, 1)


def plan_batch(topology: TopologyDef) -> BatchPlan:
    bolts = [c for c in topology.components if c.kind is ComponentKind.BOLT]
    done = {c.name for c in topology.components if c.kind is ComponentKind.SPOUT}
    order: list[str] = []
    left = list(bolts)
    while left:
        ready = [b for b in left if all(i.component in done for i in b.inputs)]
        if not ready:
            names = ", ".join(sorted(b.name for b in left))
            raise TopologyError(f"topology '{topology.name}': bolts {names} read from each other in a cycle; "
                                "a batch run needs an acyclic topology")
        for b in ready:
            order.append(b.name)
            done.add(b.name)
            left.remove(b)
    return BatchPlan(topology, round_robin(topology, 1), tuple(order))


def parse_assignments(items: Sequence[str], flag: str, components: Mapping[str, ComponentKind],
                      kind: ComponentKind) -> dict[str, str]:
    """``NAME=PATH`` items of --input (spouts) or --output (bolts), checked against the topology."""
    out: dict[str, str] = {}
    want = sorted(n for n, k in components.items() if k is kind)
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise TopologyError(f"{flag}: expected {kind.value.upper()}=PATH, found {item!r}")
        if components.get(name) is not kind:
            raise TopologyError(f"{flag} {item}: the topology has no {kind.value} '{name}'; expected one of "
                                f"{', '.join(want)}")
        out[name] = path
    return out
