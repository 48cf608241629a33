"""``heron-py restart`` and ``heron-py update``: stop and start containers of a running topology.

Restart semantics (documented in the README): a restarted container's processes come back with
the same task ids, read the same topology package, and start with no state: a bolt's
in-memory state is gone, as in Storm and Heron without stateful checkpoints. In at-least-once
mode the spouts replay whatever was in flight.

Update of an at-least-once or at-most-once topology is live: the packing is redone with the
fewest moves (planner.packing.repack: kept tasks keep their ids and containers), stored, and the
master asked to rescale (topology_master/rescale.py): the executors start the added tasks while
everything flows, the master deactivates the spouts, waits for the tuples in flight to drain,
and pushes one plan with the new packing, which every running task switches its routing to in
place, so that no key reaches two tasks. The removed tasks then stop. Only they and the added
ones start or stop. A master that cannot be reached leaves the old way: every container
restarts. The stored physical plan's version carries on, so the run state (active or
deactivated) survives the update.

Effectively once, the rescale is live as well, without a drain: at the switch every task
restores the newest complete checkpoint under the new plan, in its running process (the added
ones in theirs): each resized component's state is split over its new tasks by key group (or
merged, as its ``topology.component.state.rescale`` says), and the sources replay from their
checkpointed positions, so counts stay exact. A component whose state cannot be split
is refused here, in one line, before anything stops. The first update of a component writes its
number of key groups into its config (``topology.component.max.parallelism``): its keys' groups
never move.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from heron_py.api.api_constants import TOPOLOGY_COMPONENT_PARALLELISM
from heron_py.cli.errors import SubmitError
from heron_py.cli.submit import _log_tails
from heron_py.cli.words import counted
from heron_py.common.config import MAX_PARALLELISM, effectively_once
from heron_py.common.container_layout import TopologyPaths
from heron_py.common.host import heron_home
from heron_py.common.wire import ADMIN_RESCALE
from heron_py.planner.errors import TopologyError
from heron_py.planner.keygroups import max_parallelism
from heron_py.planner.logical import validate
from heron_py.planner.model import PackingPlan, TopologyDef
from heron_py.planner.packing import moved_tasks, repack
from heron_py.scheduler.base import Scheduler
from heron_py.state import StateManager


def parse_parallelism(items: Sequence[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in (part for given in items for part in given.split(",")):  # Heron's comp:N,comp:N too
        comp, sep, raw = item.rpartition(":")
        try:
            n = int(raw)
        except ValueError:
            n = 0
        if not sep or not comp or n < 1:
            raise SubmitError(f"--component-parallelism: expected COMPONENT:N with N an integer >= 1, found {item!r}")
        out[comp] = n
    return out


def _wait_restarted(state: StateManager, name: str, min_version: int, old_pids: Mapping[str, int],
                    wait_s: float) -> None:
    """Until the active master pushed a plan newer than ``min_version`` and every task of that
    plan runs in a process other than the one it ran in before."""
    deadline = time.monotonic() + wait_s
    packing = state.get_packing_plan(name)
    assert packing is not None
    want = {str(t.task_id) for t in packing.tasks}
    missing: list[str] = sorted(want)
    while time.monotonic() < deadline:
        es = state.get_execution_state(name) or {}
        inst = es.get("instances", {})
        missing = sorted((t for t in want if not (
            inst.get(t, {}).get("ready") and inst[t].get("pid") and inst[t]["pid"] != old_pids.get(t))),
            key=int)
        if int(es.get("pplan_version", 0)) > min_version and not missing:
            return
        time.sleep(0.2)
    raise SubmitError(f"topology '{name}' did not come back within {wait_s:g} s: tasks not running yet: "
                      f"{missing or 'none (no new plan)'}. Last log lines:\n{_log_tails(TopologyPaths.of(name))}")


def _restart(sched: Scheduler, name: str, containers: list[int], num_containers: int, command: str) -> None:
    try:
        sched.restart(name, containers, num_containers)
    except PermissionError as e:
        # a scheduler reports what it may not touch as SchedulerError; anything that still
        # slips through (a file, a process of another user) is one line, not a traceback
        raise SubmitError(f"{command}: topology '{name}' on the {sched.kind} scheduler: permission denied on "
                          f"{e.filename or 'a process of the topology'} while restarting containers {containers}; "
                          f"expected access as the user who submitted the topology, found: {e.strerror or e}"
                          ) from None


def _snapshot(state: StateManager, name: str) -> tuple[int, dict[str, int]]:
    es = state.get_execution_state(name) or {}
    pids = {t: int(i.get("pid", 0)) for t, i in es.get("instances", {}).items()}
    return int(es.get("pplan_version", 0)), pids


def restart_topology(state: StateManager, sched: Scheduler, name: str, container: int | None,
                     wait_s: float = 60.0) -> list[int]:
    packing = state.get_packing_plan(name)
    assert packing is not None
    n = packing.num_containers
    if container is not None and not 0 <= container < n:
        raise SubmitError(f"restart: topology '{name}' has no container {container}; expected 0..{n - 1}")
    containers = list(range(n)) if container is None else [container]
    version, pids = _snapshot(state, name)
    moved = {str(t.task_id) for t in packing.tasks if t.container in containers}
    _restart(sched, name, containers, n, "restart")
    _wait_restarted(state, name, version, {t: p for t, p in pids.items() if t in moved}, wait_s)
    return containers


def stateful_components(state: StateManager, topo: TopologyDef) -> set[str] | None:
    """The components with state in any complete checkpoint of the topology (what a restore may
    load); None when the checkpoint storage cannot be read from here."""
    from heron_py.checkpoint.select import open_checkpoint_storage
    from heron_py.checkpoint.storage import CheckpointError
    from heron_py.common.config import StatefulConfig

    try:
        storage = open_checkpoint_storage(StatefulConfig.from_config(topo.config), heron_home(),
                                          secret=state.get_checkpoint_key(topo.name))
        out: set[str] = set()
        for cid in storage.completed_ids(topo.name):
            marker = storage.marker(topo.name, cid)
            if marker.packing is None:
                return None  # written before markers named the packing: every component may hold state
            out.update(c for c, tasks in marker.packing.items() if marker.tasks.intersection(tasks))
        return out
    except (CheckpointError, OSError):
        return None


def _check_state_splits(state: StateManager, topo: TopologyDef, changes: Mapping[str, int]) -> None:
    """Effectively once: each resized component's checkpointed state must split over its new
    tasks (heron_py.runtime.rescale); refused in one line before anything stops."""
    from heron_py.runtime.rescale import refusal

    stateful = stateful_components(state, topo)
    for comp, n in changes.items():
        if stateful is not None and comp not in stateful:
            continue  # no checkpoint holds state of it: its new tasks start empty, as they would
        why = refusal(topo, comp, topo.component(comp).par, n)
        if why is not None:
            unread = "" if stateful is not None else " (the checkpoint storage could not be read from here)"
            raise SubmitError(f"update: topology '{topo.name}' is EFFECTIVELY_ONCE and {why}{unread}")


def update_topology(state: StateManager, sched: Scheduler, name: str, changes: Mapping[str, int],
                    wait_s: float = 60.0, drain_s: float | None = None) -> str:
    """``drain_s``: a live rescale's drain limit for this update (Storm's rebalance -w), in place
    of the topology's ``heron_py.rescale.drain.secs``."""
    topo = state.get_topology(name)
    packing = state.get_packing_plan(name)
    assert topo is not None and packing is not None
    names = [c.name for c in topo.components]
    for comp in changes:
        if comp not in names:
            raise SubmitError(f"update: topology '{name}' has no component '{comp}'; expected one of "
                              f"{', '.join(names)}")
    comps = []
    for c in topo.components:
        if c.name in changes:
            config = dict(c.config)
            if TOPOLOGY_COMPONENT_PARALLELISM in config:
                config[TOPOLOGY_COMPONENT_PARALLELISM] = changes[c.name]
            # the key groups stay those the running routers use, for the component's life
            config.setdefault(MAX_PARALLELISM.name, max_parallelism(topo.config, c.config, c.par))
            c = replace(c, par=changes[c.name], config=config)
        comps.append(c)
    new_topo = replace(topo, components=tuple(comps))
    try:
        validate(new_topo)
    except TopologyError as e:
        raise SubmitError(f"update: {e}") from None
    summary = ", ".join(f"{c} {topo.component(c).par} -> {n}" for c, n in changes.items())
    if effectively_once(topo.config):
        _check_state_splits(state, topo, changes)
    return _live_update(state, sched, name, topo, new_topo, packing, wait_s, summary, drain_s)


def _restart_all(state: StateManager, sched: Scheduler, name: str, packing: PackingPlan, wait_s: float,
                 summary: str) -> str:
    """Every container restarted onto the stored ``packing``, until every task runs in a new process."""
    version, pids = _snapshot(state, name)
    _restart(sched, name, list(range(packing.num_containers)), packing.num_containers, "update")
    # every task restarts: none may keep its old process
    _wait_restarted(state, name, version, pids, wait_s)
    return (f"{summary} ({counted(len(packing.tasks), 'task')} in "
            f"{counted(packing.num_containers, 'container')}, every container restarted)")


def _live_update(state: StateManager, sched: Scheduler, name: str, topo: TopologyDef, new_topo: TopologyDef,
                 packing: PackingPlan, wait_s: float, summary: str, drain_s: float | None) -> str:
    """Only the added and removed tasks start and stop; the master switches every other task's
    routing at a drain point, or effectively once at a restore of the newest checkpoint under the
    new plan (topology_master/rescale.py). A master that cannot be reached leaves the restart of
    every container, as before."""
    from heron_py.cli.admin import AdminError, admin_command

    try:
        new_packing = repack(packing, new_topo)
    except TopologyError as e:
        raise SubmitError(f"update: {e}") from None
    added, removed = moved_tasks(packing, new_packing)
    state.set_topology(new_topo)
    state.set_packing_plan(name, new_packing)
    sched.packing_changed(name)
    try:
        command = ADMIN_RESCALE if drain_s is None else f"{ADMIN_RESCALE} {drain_s:g}"
        resp = admin_command(state, name, command, timeout=min(30.0, wait_s))
    except AdminError as e:
        print(f"update: the topology master did not take the live rescale ({e}); restarting every container")
        return _restart_all(state, sched, name, new_packing, wait_s, summary)
    if not resp.ok:
        if state.get_packing_plan(name) == new_packing:
            # ours still: the definition the running topology has, back (another update's
            # writes since, for a rescale the master took, are left: it stores what it runs)
            state.set_topology(topo)
            state.set_packing_plan(name, packing)
            sched.packing_changed(name)
        raise SubmitError(f"update: topology '{name}': {resp.message}")
    _wait_switched(state, name, new_packing, wait_s)
    kept = len(new_packing.tasks) - len(added)
    return (f"{summary} (live: {counted(kept, 'task')} kept running, {len(added)} started, {len(removed)} stopped; "
            f"{counted(new_packing.num_containers, 'container')})")


def _wait_switched(state: StateManager, name: str, packing: PackingPlan, wait_s: float) -> None:
    """Until the master stored a plan with ``packing`` and every task of it is ready."""
    deadline = time.monotonic() + wait_s
    want = {str(t.task_id) for t in packing.tasks}
    missing: list[str] = sorted(want, key=int)
    switched = False
    while time.monotonic() < deadline:
        plan = state.get_physical_plan(name)
        switched = plan is not None and plan.packing == packing
        inst = (state.get_execution_state(name) or {}).get("instances", {})
        missing = sorted((t for t in want if not inst.get(t, {}).get("ready")), key=int)
        if switched and not missing:
            return
        time.sleep(0.1)
    why = f"tasks not ready yet: {missing}" if switched else "the master has not switched to the new packing"
    raise SubmitError(f"topology '{name}' did not finish its live rescale within {wait_s:g} s: {why}. "
                      f"Last log lines:\n{_log_tails(TopologyPaths.of(name))}")
