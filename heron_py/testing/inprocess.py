"""Run a topology inside one process, with the engine's own routing and batching."""

from __future__ import annotations

import collections
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from heron_py.api.topology_context import TopologyContext
from heron_py.api.tuple import HeronTuple, TupleHelper
from heron_py.common.config_codec import restore_config
from heron_py.common.framing import BATCH_HEADER, BODY_OFFSET, HEADER_SIZE, MsgType
from heron_py.common.serialization import loads_batch, loads_user_object
from heron_py.planner.logical import validate
from heron_py.planner.model import (
    ComponentKind,
    PhysicalPlan,
    StmgrLocation,
    TopologyDef,
    TopologyState,
)
from heron_py.planner.packing import round_robin
from heron_py.runtime.emitter import Emitter


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


class _Delegate:
    def __init__(self, emitter: Emitter, name: str) -> None:
        self._emitter = emitter
        self.logger = logging.getLogger(name)

    def emit(self, tup: Any, stream: str = "default", anchors: Any = None, direct_task: int | None = None,
             need_task_ids: bool = False, tup_id: Any = None) -> list[int] | None:
        return self._emitter.emit(tup, stream, direct_task, need_task_ids)

    def ack(self, tup: Any) -> None:
        pass

    def fail(self, tup: Any) -> None:
        pass

    def log(self, message: str, level: Any = None) -> None:
        self.logger.log(level if isinstance(level, int) else logging.INFO, message)


def _preparer(context: TopologyContext) -> Callable[[Any, str, str, list[int]], None]:
    def prepare(grouping: Any, component: str, stream: str, targets: list[int]) -> None:
        grouping.prepare(context, component, stream, targets)

    return prepare


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
    task_component = {t.task_id: t.component for t in packing.tasks}
    result = InProcessResult(received={c: [] for c in capture})
    captured = set(capture)

    def sink(frames: list[bytes]) -> None:
        for f in frames:
            if f[5] == MsgType.TUPLE_BATCH:  # in process, acking is not tracked
                inboxes[BATCH_HEADER.unpack_from(f, HEADER_SIZE)[0]].append(f)

    emitters: dict[int, Emitter] = {}
    for t in packing.tasks:
        comp = topo.component(t.component)
        conf = restore_config({**topo.config, **comp.config})
        context = TopologyContext(topo, packing, t.task_id, conf)
        em = Emitter(plan, t.task_id, 1024, sink, custom_loader=loads_user_object,
                     prepare_custom=_preparer(context), rng=random.Random(rng.random()))
        emitters[t.task_id] = em
        user = loads_user_object(comp.class_ref.data)(_Delegate(em, f"{t.component}-{t.task_id}"))
        user.initialize(conf, context)
        result.components[t.task_id] = user

    spouts = [t.task_id for t in packing.tasks if topo.component(t.component).kind is ComponentKind.SPOUT]
    for st in spouts:
        result.components[st].activate()

    def drain() -> None:
        busy = True
        while busy:
            busy = False
            for em in emitters.values():
                em.flush()
            for task, box in inboxes.items():
                user = result.components[task]
                comp_name = task_component[task]
                while box:
                    busy = True
                    frame = box.popleft()
                    src = BATCH_HEADER.unpack_from(frame, HEADER_SIZE)[1]
                    for stream, values in loads_batch(memoryview(frame)[BODY_OFFSET:]):
                        if comp_name in captured:
                            result.received[comp_name].append(
                                Received(task, task_component[src], src, stream, list(values)))
                        user.process(HeronTuple(None, task_component[src], stream, src, values, 0.0, None))

    calls = 0
    idle = {t: 0 for t in spouts}
    while calls < max_spout_calls and any(i < idle_calls for i in idle.values()):
        for st in spouts:
            if idle[st] >= idle_calls:
                continue
            before = emitters[st].emitted
            result.components[st].next_tuple()
            calls += 1
            idle[st] = idle[st] + 1 if emitters[st].emitted == before else 0
        if calls % 1000 == 0:
            drain()
    drain()
    for _ in range(ticks):
        for task, user in result.components.items():
            if task not in spouts:
                user.process_tick(TupleHelper.make_tick_tuple())
        drain()
    return result
