"""Run a topology inside one process, with the engine's own routing and batching: at most once,
on the wall clock, shell components polled and waited for (``heron_py.testing.runner`` runs it).
Also the set-up the in-process runners share: the topology checked, its plan, a capture."""

from __future__ import annotations

import functools
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from heron_py.planner.logical import validate
from heron_py.planner.model import (
    PhysicalPlan,
    StmgrLocation,
    TopologyDef,
    TopologyState,
)
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import BoltHost, Observer
from heron_py.testing.runner import Runner, RunOptions, Task


@dataclass
class Received:
    task: int
    source: str
    source_task: int
    stream: str
    values: list[Any]


@dataclass
class InProcessResult:
    received: dict[str, list[Received]] = field(default_factory=dict)
    components: dict[int, Any] = field(default_factory=dict)  # task id -> user object

    def values(self, component: str, stream: str | None = None) -> list[list[Any]]:
        return [r.values for r in self.received.get(component, []) if stream is None or r.stream == stream]


def fused_hint(topology: TopologyDef, what: str, name: str) -> None:
    """ValueError when ``name`` is no component of ``topology`` but a streamlet fused into one
    (Streamlet fusion is on by default): capturing it would give nothing, silently."""
    from heron_py.api.streamlet.graph import fused_name_error

    error = fused_name_error(topology, what, name)
    if error is not None:
        raise ValueError(error)


def load_topology(topology: TopologyDef | Any, what: str, capture: Iterable[str]) -> TopologyDef:
    """``topology`` (a TopologyDef or anything with ``build()``), validated, with every captured
    name checked: both runners refuse what a submit would, and a fused streamlet's name."""
    topo: TopologyDef = topology if isinstance(topology, TopologyDef) else topology.build()
    validate(topo)
    for c in capture:
        fused_hint(topo, what, c)
    return topo


def in_process_plan(topology: TopologyDef, containers: int, host: str) -> PhysicalPlan:
    """The physical plan of a run in this process: the submit's packing, no ports."""
    packing = round_robin(topology, containers)
    return PhysicalPlan(topology, packing, tuple(StmgrLocation(c, host, 0, 0) for c in range(containers)),
                        TopologyState.RUNNING, 1)


def capture_observer(received: dict[str, list[Received]], task: int, component: str) -> Observer | None:
    """What a captured component's task receives, appended to ``received[component]`` (None:
    not captured)."""
    if component not in received:
        return None
    out = received[component]
    return lambda source, src, rows: out.extend(Received(task, source, src, r[0], list(r[1])) for r in rows)


def run_in_process(
    topology: TopologyDef | Any,
    *,
    containers: int = 1,
    capture: Iterable[str] = (),
    max_spout_calls: int = 100_000,
    idle_calls: int = 100,
    ticks: int = 0,
    seed: int = 0,
    settle_timeout_s: float = 60.0,
) -> InProcessResult:
    """Runs every spout until it stops emitting (``idle_calls`` calls in a row emit nothing)
    or ``max_spout_calls`` calls are made, delivering every batch; then sends ``ticks`` tick
    tuples to every bolt. ``topology`` is a TopologyDef or anything with ``build()``.

    Components with input of their own (a ``heron_poll`` method: shell components and their
    subprocesses) are polled with every delivery and waited for, up to ``settle_timeout_s``,
    until they are quiet (``heron_busy()`` false, when they define it); they are closed at the end."""
    capture = list(capture)
    topo = load_topology(topology, "run_in_process capture", capture)
    result = InProcessResult(received={c: [] for c in capture})
    # at most once on the wall clock: nothing tracks trees, and no master waits on the routing
    options = RunOptions(poll=True, route_at_once=True, observer=functools.partial(capture_observer, result.received),
                         on_start=functools.partial(_keep_user, result.components))
    run = Runner(in_process_plan(topo, containers, "in-process"), options, random.Random(seed))
    run.start()
    run.until_idle(idle_calls, max_spout_calls)
    _settle(run, settle_timeout_s)
    for _ in range(ticks):
        for b in run.hosts(BoltHost):
            b.tick()
        run.drain()
        _settle(run, settle_timeout_s)
    # its spouts stay open: the result hands their components to the test as they ended
    run.close(spouts=False)
    return result


def _keep_user(components: dict[int, Any], task: Task) -> None:
    components[task.task_id] = task.host.user


def _settle(run: Runner, timeout_s: float) -> None:
    waiting = run.settle(timeout_s)
    if waiting:
        raise TimeoutError(f"run_in_process: {waiting} still busy after {timeout_s:g} s "
                           f"(settle_timeout_s); expected their subprocesses to answer")
