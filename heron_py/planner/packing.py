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


def repack(old: PackingPlan, topology: TopologyDef) -> PackingPlan:
    """The packing of a live rescale: ``topology``'s parallelisms on ``old``'s containers with
    as little moved as possible, so that only what must change is stopped. Every kept task keeps
    its id, index and container; a component that shrinks loses its highest indexes; one that
    grows gets new ids above every id it ever had (``id_floor``; a component's ids then still ascend with
    its indexes, which its key groups follow), each on the container with the fewest tasks
    (the lowest-numbered on a tie), as round_robin spreads them. Ids are no longer dense after
    a shrink. Components the topology no longer has are dropped; new ones grow from nothing."""
    n = old.num_containers
    total = sum(c.par for c in topology.components)
    if n > total:
        raise TopologyError(f"topology '{topology.name}': {n} containers for {total} tasks; "
                            f"expected at most one container per task")
    par = {c.name: c.par for c in topology.components}
    kept = [t for t in old.tasks if t.component in par and t.component_index < par[t.component]]
    load = [0] * n
    for t in kept:
        load[t.container] += 1
    have: dict[str, int] = {}
    for t in kept:
        have[t.component] = have.get(t.component, 0) + 1
    next_id = max(old.id_floor, max((t.task_id for t in old.tasks), default=0) + 1)
    tasks = list(kept)
    for comp in topology.components:
        for i in range(have.get(comp.name, 0), comp.par):
            k = min(range(n), key=lambda c: (load[c], c))
            tasks.append(TaskPlacement(next_id, comp.name, i, k))
            load[k] += 1
            next_id += 1
    return PackingPlan(n, tuple(sorted(tasks, key=lambda t: t.task_id)), id_floor=next_id)


def moved_tasks(old: PackingPlan, new: PackingPlan) -> tuple[set[int], set[int]]:
    """(added, removed) task ids between two packings of one topology (pure)."""
    before = {t.task_id for t in old.tasks}
    after = {t.task_id for t in new.tasks}
    return after - before, before - after
