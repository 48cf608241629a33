"""Run a topology inside one process, with the engine's own routing and batching."""

from __future__ import annotations

import collections
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from heron_py.common.config import ReliabilityConfig
from heron_py.common.framing import MsgType, batch_dest, frame_type
from heron_py.planner.logical import validate
from heron_py.planner.model import (
    PhysicalPlan,
    StmgrLocation,
    TopologyDef,
    TopologyState,
)
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import BoltHost, ComponentHost, HostOptions, Observer, SpoutHost, make_host


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


def run_in_process(
    topology: TopologyDef | Any,
    *,
    containers: int = 1,
    capture: Iterable[str] = (),
    max_spout_calls: int = 100_000,
    idle_calls: int = 100,
    ticks: int = 0,
    seed: int = 0,
) -> InProcessResult:
    """Runs every spout until it stops emitting (``idle_calls`` calls in a row emit nothing)
    or ``max_spout_calls`` calls are made, delivering every batch; then sends ``ticks`` tick
    tuples to every bolt. ``topology`` is a TopologyDef or anything with ``build()``."""
    topo: TopologyDef = topology if isinstance(topology, TopologyDef) else topology.build()
    validate(topo)
    packing = round_robin(topo, containers)
    plan = PhysicalPlan(topo, packing, tuple(StmgrLocation(c, "in-process", 0, 0) for c in range(containers)),
                        TopologyState.RUNNING, 1)
    rng = random.Random(seed)
    inboxes: dict[int, collections.deque[bytes]] = {t.task_id: collections.deque() for t in packing.tasks}
    result = InProcessResult(received={c: [] for c in capture})

    def sink(frames: list[bytes]) -> None:
        for f in frames:
            if frame_type(f) == MsgType.TUPLE_BATCH:  # in process, acking is not tracked
                inboxes[batch_dest(f)].append(f)

    def observer(task: int, component: str) -> Observer | None:
        if component not in result.received:
            return None
        out = result.received[component]
        return lambda source, src, rows: out.extend(Received(task, source, src, r[0], list(r[1])) for r in rows)

    hosts: dict[int, ComponentHost] = {}
    for t in packing.tasks:
        # at most once: nothing here tracks acks, so a spout must not wait for them
        options = HostOptions(reliability=ReliabilityConfig(), observer=observer(t.task_id, t.component),
                              rng=random.Random(rng.random()))
        host = hosts[t.task_id] = make_host(plan, t.task_id, sink, options)
        host.initialize()
        result.components[t.task_id] = host.user
    spouts = [h for h in hosts.values() if isinstance(h, SpoutHost)]
    bolts = [h for h in hosts.values() if isinstance(h, BoltHost)]
    for sp in spouts:
        sp.start()

    def drain() -> None:
        busy = True
        while busy:
            busy = False
            for h in hosts.values():
                h.flush()
            for b in bolts:
                box = inboxes[b.task_id]
                while box:
                    busy = True
                    b.process_frame(box.popleft())

    calls = 0
    idle = {sp.task_id: 0 for sp in spouts}
    while calls < max_spout_calls and any(i < idle_calls for i in idle.values()):
        for sp in spouts:
            if idle[sp.task_id] >= idle_calls:
                continue
            emitted = sp.next_tuples(1)
            calls += 1
            idle[sp.task_id] = idle[sp.task_id] + 1 if not emitted else 0
        if calls % 1000 == 0:
            drain()
    drain()
    for _ in range(ticks):
        for b in bolts:
            b.tick()
        drain()
    return result
