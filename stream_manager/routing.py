"""Where each task of a physical plan lives, seen from one container's stream manager (pure).

Built once per physical plan and never changed: a new plan builds a new table, so a frame is
always routed against one consistent view.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from heron_py.planner.model import ComponentKind, PhysicalPlan


@dataclass(frozen=True)
class RoutingTable:
    container: int
    local_tasks: frozenset[int] = frozenset()
    local_spouts: frozenset[int] = frozenset()
    # read-only views: a frozen table must not be changed through its mappings either
    container_of: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    component_of: Mapping[int, str] = field(default_factory=lambda: MappingProxyType({}), compare=False)

    @classmethod
    def build(cls, plan: PhysicalPlan, container: int) -> RoutingTable:
        container_of = {t.task_id: t.container for t in plan.packing.tasks}
        local = frozenset(t for t, c in container_of.items() if c == container)
        spouts = {c.name for c in plan.topology.components if c.kind is ComponentKind.SPOUT}
        return cls(
            container=container,
            local_tasks=local,
            local_spouts=frozenset(t.task_id for t in plan.packing.tasks
                                   if t.component in spouts and t.task_id in local),
            container_of=MappingProxyType(container_of),
            component_of=MappingProxyType({t.task_id: t.component for t in plan.packing.tasks}),
        )

    def is_local(self, task: int) -> bool:
        return task in self.local_tasks

    def is_local_spout(self, task: int) -> bool:
        return task in self.local_spouts

    def container_for(self, task: int) -> int | None:
        """The container running ``task``; None for a task the plan does not have."""
        return self.container_of.get(task)
