"""An instance's busy time, ``__busy-time-ms`` (instance/execution.py): the time its execution
thread spent at work (user code, flushing), which a health manager divides what the task
processed by (its true rate, DS2). The loops run on a fake clock that only the user's code, a
put on the outbound queue and the waits move, by amounts exact in binary, so the metric is
asserted to the millisecond: waits for input and time blocked on a full outbound queue are not
in it, and busy + idle + blocked is all the time that passed."""

from __future__ import annotations

import json
import logging
import queue
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import instance.execution as execution
from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.common.framing import MsgType, encode_batch_frame
from heron_py.common.metric_names import is_counter
from heron_py.common.serialization import MAIN_ALIAS, dumps_body
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from instance.execution import TaskRunner
from instance.metrics import TaskReports
from instance.queues import InItem, InKind, Outbox, OutQueue, QueueBytes

NEVER = 1000.0  # timers out of reach: only the script moves the loop
PUT_S = 0.015625  # a flush handed to the outbound queue (work)
BLOCKED_S = 4.0  # a bolt's flush waiting for room in a full outbound queue
TICK_S = 0.03125  # a bolt's process_tick


class FakeClock:
    def __init__(self) -> None:
        self.t = 64.0

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


class TimedOutQueue(OutQueue):
    """The outbound queue on the fake clock: a put costs PUT_S. While ``no_room``, a put that
    does not wait is refused, and one that waits gets room after BLOCKED_S (the gateway took)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(1 << 10, 1 << 30)
        self.clock = clock
        self.no_room = False
        self.puts = 0

    def offer(self, frames: list[bytes], size: int, timeout: float = 0.0) -> bool:
        if self.no_room:
            if timeout <= 0:
                return False
            self.clock.advance(BLOCKED_S)
            self.no_room = False
        else:
            self.clock.advance(PUT_S)
            self.puts += 1
        return super().offer(frames, size)


class ScriptedInbound(queue.Queue[InItem]):
    """The inbound queue, the test playing the gateway: a get that would wait takes the next
    step of the script instead (the seconds it waits, then what arrives, if anything); the
    gateway takes what is in the outbound queue meanwhile. Out of steps: the task is stopped."""

    def __init__(self, clock: FakeClock, out: TimedOutQueue, steps: list[tuple[float, list[InItem]]]) -> None:
        super().__init__()
        self.clock, self.out, self.steps = clock, out, steps
        self.waited_s = 0.0
        self.stop: Callable[[], None] = lambda: None

    def get(self, block: bool = True, timeout: float | None = None) -> InItem:
        if block and not self.queue:
            if not self.steps:
                self.stop()
                raise queue.Empty
            seconds, items = self.steps.pop(0)
            self.clock.advance(seconds)
            self.waited_s += seconds
            self.out.no_room = False
            for item in items:
                self.put_nowait(item)
            if not self.queue:
                raise queue.Empty
        return super().get(block=False)


class Working(Bolt):
    """Works (the fake clock moves) for the seconds its tuple carries, and emits them on; the
    tuple of ``fills_on`` seconds fills the outbound queue first."""

    outputs = ["s"]
    clock = FakeClock()
    ticks = 0
    fills_on: float | None = None
    out: TimedOutQueue | None = None

    def process(self, tup: Any) -> None:
        if tup.values[0] == Working.fills_on:
            assert Working.out is not None
            Working.out.no_room = True
        Working.clock.advance(tup.values[0])
        self.emit([tup.values[0]])

    def process_tick(self, tup: Any) -> None:
        Working.ticks += 1
        Working.clock.advance(TICK_S)


class Scripted(Spout):
    """next_tuple per its script: (seconds of work, emits, says it waited on its own source,
    fills the outbound queue first); out of script, it stops the task and emits nothing."""

    outputs = ["s"]
    clock = FakeClock()
    calls: list[tuple[float, bool, bool, bool]] = []
    out: TimedOutQueue | None = None
    stop: Callable[[], None] = staticmethod(lambda: None)

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.heron_waited = False

    def next_tuple(self) -> None:
        if not Scripted.calls:
            self.heron_waited = False
            Scripted.stop()
            return
        seconds, emits, waited, fills = Scripted.calls.pop(0)
        if fills:
            assert Scripted.out is not None
            Scripted.out.no_room = True
        Scripted.clock.advance(seconds)
        self.heron_waited = waited
        if emits:
            self.emit([seconds])


class Sink(Bolt):
    outputs: list[str] = []

    def process(self, tup: Any) -> None:
        pass


def _plan(bolt_conf: dict[str, Any] | None = None) -> PhysicalPlan:
    b = TopologyBuilder("busy")
    s = b.add_spout("spout", Scripted, par=1)
    w = b.add_bolt("work", Working, par=1, inputs={s: Grouping.SHUFFLE}, config=bolt_conf or {})
    b.add_bolt("sink", Sink, par=1, inputs={w: Grouping.SHUFFLE})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


class _Task:
    """One task's execution thread on the fake clock, run to its end on the test's thread."""

    def __init__(self, plan: PhysicalPlan, component: str, clock: FakeClock,
                 steps: list[tuple[float, list[InItem]]]) -> None:
        self.out = TimedOutQueue(clock)
        self.inbound = ScriptedInbound(clock, self.out, steps)
        self.outbox = Outbox(self.out, QueueBytes(1 << 30), lambda: None, clock=clock)
        self.in_bytes = QueueBytes(1 << 30)
        self.task = plan.packing.tasks_of(component)[0]
        self.reports = TaskReports(self.task, component, self.inbound, self.in_bytes, self.outbox)
        self.runner = TaskRunner(task_id=self.task, component=component, package_dir=Path("."),
                                 inbound=self.inbound, in_bytes=self.in_bytes, outbox=self.outbox,
                                 reports=self.reports, mark_ready=lambda: None,
                                 log=logging.getLogger("test-busy"), clock=clock)
        self.inbound.stop = self.runner.stop
        self.inbound.put_nowait((InKind.PPLAN, json.dumps(plan.to_dict()).encode()))

    def run(self) -> dict[str, Any]:
        assert self.runner.run() == 0
        counters: dict[str, Any] = self.reports.report()["counters"]
        return counters


@pytest.fixture()
def stand_in_main(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The topology's classes are importable from this module (no package to load), and the
    loops' timers are out of reach."""
    monkeypatch.setitem(sys.modules, MAIN_ALIAS, types.ModuleType(MAIN_ALIAS))
    for name in ("USER_METRICS_S", "EXPIRE_S"):
        monkeypatch.setattr(execution, name, NEVER)
    yield


def _batch(plan: PhysicalPlan, *seconds: float) -> InItem:
    """A TUPLE_BATCH from the spout to the working bolt: one tuple per duration of work."""
    dest, src = plan.packing.tasks_of("work")[0], plan.packing.tasks_of("spout")[0]
    body = dumps_body(None, [[s] for s in seconds], None)
    return InKind.BATCH, encode_batch_frame(dest, src, body, MsgType.TUPLE_BATCH, len(seconds))


def test_a_bolt_is_busy_for_its_process_calls_and_flushes_and_not_while_it_waits_for_input(
        stand_in_main: None) -> None:
    clock = Working.clock = FakeClock()
    Working.ticks = 0
    plan = _plan()
    steps: list[tuple[float, list[InItem]]] = [
        (0.5, [_batch(plan, 0.25, 0.125)]),  # half a second idle, then 0.375 s of work
        (1.0, []),  # a second of nothing
        (0.25, [_batch(plan, 0.5), _batch(plan, 0.0625, 0.0625)]),  # two batches queued at once
        (2.0, []),
        (0.125, [_batch(plan, 1.0)]),
    ]
    task = _Task(plan, "work", clock, steps)
    start = clock()
    counters = task.run()
    work = 0.25 + 0.125 + 0.5 + 0.0625 + 0.0625 + 1.0
    assert task.out.puts == 3  # one flush per turn that processed (flush at once when idle)
    busy = work + 3 * PUT_S
    assert counters["__busy-time-ms"] == int(busy * 1000)
    assert task.reports.exec_counters().busy_s == busy
    assert counters["__time-blocked-ms"] == 0
    assert task.inbound.waited_s == 0.5 + 1.0 + 0.25 + 2.0 + 0.125
    assert clock() - start == busy + task.inbound.waited_s  # every second is busy or idle


def test_a_bolt_blocked_on_a_full_outbound_queue_is_not_busy_for_that_time(stand_in_main: None) -> None:
    clock = Working.clock = FakeClock()
    plan = _plan()
    task = _Task(plan, "work", clock, [(0.5, [_batch(plan, 0.75)]), (0.25, [_batch(plan, 0.125)])])
    Working.fills_on, Working.out = 0.75, task.out  # the queue fills while that batch is processed
    start = clock()
    try:
        counters = task.run()
    finally:
        Working.fills_on = Working.out = None
    # the first flush waited BLOCKED_S for room (counted as time blocked), the second went at once
    assert task.out.puts == 1
    assert task.outbox.time_blocked_s == BLOCKED_S
    assert counters["__time-blocked-ms"] == BLOCKED_S * 1000
    busy = 0.75 + 0.125 + PUT_S
    assert task.reports.exec_counters().busy_s == busy
    assert counters["__busy-time-ms"] == int(busy * 1000)
    assert clock() - start == busy + BLOCKED_S + task.inbound.waited_s


def test_a_bolts_ticks_are_busy_time(stand_in_main: None) -> None:
    clock = Working.clock = FakeClock()
    Working.ticks = 0
    plan = _plan({"topology.tick.tuple.freq.secs": 1.0})
    task = _Task(plan, "work", clock, [(2.0, []), (2.0, [])])
    start = clock()
    counters = task.run()
    assert Working.ticks == 2 and task.out.puts == 0
    assert task.reports.exec_counters().busy_s == 2 * TICK_S
    assert counters["__busy-time-ms"] == int(2 * TICK_S * 1000)
    assert clock() - start == 2 * TICK_S + task.inbound.waited_s


def test_a_spout_is_busy_for_next_tuple_and_flushes_and_not_while_idle_waiting_or_blocked(
        stand_in_main: None) -> None:
    clock = Scripted.clock = FakeClock()
    plan = _plan()
    # every wait of the spout loop on its inbound queue: a quarter of a second, nothing comes
    task = _Task(plan, "spout", clock, [(0.25, [])] * 50)
    Scripted.out, Scripted.stop = task.out, task.runner.stop
    Scripted.calls = [
        (0.5, True, False, False),  # work, emit: flushed (the batch interval is up)
        (0.125, False, False, False),  # nothing to emit: flush (nothing pending), idle wait
        (0.375, True, False, True),  # the outbound queue fills first: the flush is held
        (0.0625, True, False, False),  # after a blocked wait, the held flush goes, then this one's
        (0.25, False, False, False),  # idle again
        (3.0, False, True, False),  # waited 3 s on its own source (a Kafka poll): not work
        (0.75, True, False, False),
    ]
    start = clock()
    counters = task.run()
    assert task.out.puts == 4
    busy = 0.5 + 0.125 + 0.375 + 0.0625 + 0.25 + 0.75 + 4 * PUT_S
    blocked = 0.25  # the one wait while its frames were held
    assert task.outbox.time_blocked_s == blocked
    assert counters["__time-blocked-ms"] == blocked * 1000
    assert task.reports.exec_counters().busy_s == busy
    assert counters["__busy-time-ms"] == int(busy * 1000)
    idle = task.inbound.waited_s - blocked
    assert idle >= 3 * 0.25  # the idle waits after the empty rounds (and the last one)
    assert clock() - start == busy + blocked + idle + 3.0  # every second: busy, blocked or idle


def test_busy_time_is_a_counter_every_task_reports() -> None:
    assert is_counter("__busy-time-ms")
    out = Outbox(OutQueue(4, 1 << 20), QueueBytes(1 << 20), lambda: None)
    reports = TaskReports(1, "spout", queue.Queue(), QueueBytes(1), out)
    metrics = types.SimpleNamespace(acked=0, failed=0, timed_out=0, percentile=lambda q: None)
    emitter = types.SimpleNamespace(emitted_by_stream={}, emitted=0, storm_arity=None)
    reports.host = types.SimpleNamespace(emitter=emitter, metrics=metrics, user_metrics={})  # type: ignore[assignment]
    reports.exec_counters().busy_s = 1.25  # a spout's: the loop writes the reports' own counters
    assert reports.report()["counters"]["__busy-time-ms"] == 1250


class Probing(Working):
    """Working, and a report taken halfway through a tuple's work (the gateway's, mid-turn)."""

    seen: list[int] = []
    reports: TaskReports | None = None

    def process(self, tup: Any) -> None:
        Working.clock.advance(tup.values[0] / 2)
        assert Probing.reports is not None
        Probing.seen.append(Probing.reports.report()["counters"]["__busy-time-ms"])
        Working.clock.advance(tup.values[0] / 2)


def test_a_report_in_the_middle_of_a_long_turn_counts_the_turn_so_far(stand_in_main: None) -> None:
    """A slow bolt's backlog makes turns of seconds: a report while one runs shows its work so
    far (it read 0 until the turn ended, and a health manager saw a busy task as idle)."""
    clock = Working.clock = FakeClock()
    plan = _plan_with(Probing)
    task = _Task(plan, "work", clock, [(0.5, [_batch(plan, 2.0, 1.0)])])
    Probing.seen, Probing.reports = [], task.reports
    task.run()
    # halfway through the first tuple: 1 s at work; halfway through the second: 2.5 s
    assert Probing.seen == [1000, 2500]
    assert task.reports.exec_counters().busy_s == 3.0  # it emits nothing: no flush


def test_a_task_a_rescale_removed_processes_what_is_left_in_its_queue_before_it_exits(
        stand_in_main: None) -> None:
    """The switch came while a backlog was queued (the drain did not wait it out): at its stop
    the removed task processes the rest, where it would otherwise be lost at the exit."""
    import dataclasses

    clock = FakeClock()
    plan = _plan_with(StopsTask)
    work = plan.packing.tasks_of("work")[0]
    without = dataclasses.replace(plan, version=2, packing=dataclasses.replace(
        plan.packing, tasks=tuple(t for t in plan.packing.tasks if t.task_id != work)))
    batches = [_batch(plan, 0.0078125) for _ in range(execution.BOLT_BATCHES + 4)]
    task = _Task(plan, "work", clock, [(0.5, [(InKind.PPLAN, json.dumps(without.to_dict()).encode()),
                                                *batches])])
    StopsTask.processed, StopsTask.stop = [], task.runner.stop
    task.run()
    assert len(StopsTask.processed) == len(batches)  # all of them, not only the turn's BOLT_BATCHES + 1


class StopsTask(Bolt):
    """Stops its task (the executor's SIGTERM) at its first tuple, with a backlog still queued."""

    outputs: list[str] = []
    processed: list[float] = []
    stop: Callable[[], None] = staticmethod(lambda: None)

    def process(self, tup: Any) -> None:
        StopsTask.processed.append(tup.values[0])
        StopsTask.stop()


def _plan_with(bolt: type) -> PhysicalPlan:
    b = TopologyBuilder("busy")
    s = b.add_spout("spout", Scripted, par=1)
    b.add_bolt("work", bolt, par=1, inputs={s: Grouping.SHUFFLE})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


def test_what_a_removed_task_could_not_process_within_its_drain_time_is_counted(stand_in_main: None) -> None:
    """The drain time over (0 here), the rest of the removed task's queue is dropped and counted
    in ``__dropped-tuples/shutdown``, as at most once's drops are."""
    import dataclasses

    clock = FakeClock()
    plan = _plan_with(StopsTask)
    work = plan.packing.tasks_of("work")[0]
    without = dataclasses.replace(plan, version=2, packing=dataclasses.replace(
        plan.packing, tasks=tuple(t for t in plan.packing.tasks if t.task_id != work)))
    batches = [_batch(plan, 0.0078125, 0.0078125) for _ in range(execution.BOLT_BATCHES + 4)]
    task = _Task(plan, "work", clock, [(0.5, [(InKind.PPLAN, json.dumps(without.to_dict()).encode()),
                                                *batches])])
    StopsTask.processed, StopsTask.stop = [], task.runner.stop
    task.runner.drain_s = 0.0  # set from the plan at the start: cut here before the stop
    original = task.runner._begin

    def begin(host: Any) -> bool:
        ok = original(host)
        task.runner.drain_s = 0.0
        return ok

    task.runner._begin = begin  # type: ignore[method-assign]
    counters = task.run()
    done = len(StopsTask.processed) // 2  # the turn it was stopped in (the plan took one of its items)
    assert done == execution.BOLT_BATCHES
    assert counters["__dropped-tuples/shutdown"] == 2 * (len(batches) - done)  # 2 tuples a batch
