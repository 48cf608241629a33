"""Packing: which task runs in which container. Pure and deterministic."""

from __future__ import annotations

from heron_py.planner.errors import TopologyError
from heron_py.planner.model import PackingPlan, TaskPlacement, TopologyDef


def round_robin(topology: TopologyDef, num_containers: int) -> PackingPlan:
    """Deals tasks to containers in turn, continuing across components (in topology order), so
    containers differ by at most one task. Task ids are dense from 1."""
    total = sum(c.par for c in topology.components)
    if isinstance(num_containers, bool) or not isinstance(num_containers, int) or num_containers < 1:
        raise TopologyError(f"topology '{topology.name}': number of containers must be an integer >= 1, "
                            f"found {num_containers!r}")
    if num_containers > total:
        raise TopologyError(f"topology '{topology.name}': {num_containers} containers for {total} tasks; "
                            f"expected at most one container per task")
    tasks = []
    task_id = 1
    k = 0
    for comp in topology.components:
        for i in range(comp.par):
            tasks.append(TaskPlacement(task_id, comp.name, i, k % num_containers))
            task_id += 1
            k += 1
    return PackingPlan(num_containers, tuple(tasks))
