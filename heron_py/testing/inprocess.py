"""Run a topology inside one process, with the engine's own routing and batching."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from heron_py.common.config import ReliabilityConfig
from heron_py.planner.logical import validate
from heron_py.planner.model import (
    PhysicalPlan,
    StmgrLocation,
    TopologyDef,
    TopologyState,
)
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import BoltHost, ComponentHost, HostOptions, Observer, SpoutHost, make_host
from heron_py.testing.wire import InProcessWire


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
    run = _InProcess(topo, containers, InProcessResult(received={c: [] for c in capture}), random.Random(seed))
    run.spouts_until_idle(max_spout_calls, idle_calls)
    _settle(run.pollable, run.drain, settle_timeout_s)
    for _ in range(ticks):
        for b in run.bolts:
            b.tick()
        run.drain()
        _settle(run.pollable, run.drain, settle_timeout_s)
    # a graceful end, as a killed topology's bolts get: their cleanup may emit (a keyed
    # aggregation in "final" mode), and what they emit is delivered before the result is read
    for b in run.bolts:
        if b not in run.pollable:
            b.close()
    run.drain()
    for h in run.pollable:
        h.close()  # no subprocess outlives the run
    return run.result


class _InProcess:
    """Every task's host in this process, on an in-process wire whose inboxes (one deque per
    task) the runner delivers. At most once, nothing is tracked: the wire drops acks and reports."""

    def __init__(self, topo: TopologyDef, containers: int, result: InProcessResult, rng: random.Random) -> None:
        plan = in_process_plan(topo, containers, "in-process")
        self.result = result
        self.wire = InProcessWire((t.task_id for t in plan.packing.tasks), on_acks=self._on_acks())
        self.inboxes = self.wire.inboxes
        self.hosts: dict[int, ComponentHost] = {}
        for t in plan.packing.tasks:
            options = HostOptions(reliability=self._reliability(), observer=self._observer(t.task_id, t.component),
                                  rng=random.Random(rng.random()))
            host = self.hosts[t.task_id] = make_host(plan, t.task_id, self._sink, options)
            host.initialize()
            result.components[t.task_id] = host.user
        self.spouts = [h for h in self.hosts.values() if isinstance(h, SpoutHost)]
        self.bolts = [h for h in self.hosts.values() if isinstance(h, BoltHost)]
        self.pollable = [h for h in self.hosts.values() if h.poll_s is not None]
        for sp in self.spouts:
            sp.start()

    def _reliability(self) -> ReliabilityConfig:
        """At most once: nothing here tracks acks, so a spout must not wait for them."""
        return ReliabilityConfig()

    def _on_acks(self) -> Callable[[bytes], None] | None:
        """Where the wire hands ACK_BATCH frames: nowhere at most once (a runner that tracks
        trees gives its tracker's)."""
        return None

    def _sink(self, frames: list[bytes]) -> None:
        # routed at once: a bolt later in this round may take what an earlier one emitted
        self.wire.send(frames)
        self.wire.route()

    def _observer(self, task: int, component: str) -> Observer | None:
        return capture_observer(self.result.received, task, component)

    def drain(self) -> bool:
        """Delivers every batch; True if any was delivered."""
        worked, busy = False, True
        while busy:
            busy = False
            for h in self.pollable:
                h.poll()
            for h in self.hosts.values():
                h.flush()
            for b in self.bolts:
                box = self.inboxes[b.task_id]
                while box:
                    busy = worked = True
                    b.process_frame(box.popleft())
        return worked

    def spouts_until_idle(self, max_calls: int, idle_calls: int) -> None:
        """Calls the spouts in turn until each emitted nothing ``idle_calls`` times in a row (or
        ``max_calls`` calls in all), delivering every thousand calls and at the end."""
        calls = 0
        idle = {sp.task_id: 0 for sp in self.spouts}
        while calls < max_calls and any(i < idle_calls for i in idle.values()):
            for sp in self.spouts:
                if idle[sp.task_id] >= idle_calls:
                    continue
                emitted = sp.next_tuples(1)
                calls += 1
                idle[sp.task_id] = idle[sp.task_id] + 1 if not emitted else 0
            if calls % 1000 == 0:
                self.drain()
        self.drain()


def _settle(pollable: list[ComponentHost], drain: Callable[[], bool], timeout_s: float) -> None:
    """Polls and delivers until no pollable component is busy and nothing more moves."""
    deadline = time.monotonic() + timeout_s
    while pollable:
        moved = drain()
        waiting = [h.component for h in pollable if _busy(h)]
        if not waiting and not moved:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"run_in_process: {sorted(set(waiting))} still busy after {timeout_s:g} s "
                               f"(settle_timeout_s); expected their subprocesses to answer")
        time.sleep(0.001)


def _busy(host: ComponentHost) -> bool:
    busy = getattr(host.user, "heron_busy", None)
    return bool(busy()) if callable(busy) else False
