"""A task's wait for its physical plan (instance/execution.py TaskRunner): a live rescale starts
its new tasks before the plan that adds them is pushed, and their stream manager hands them the
plan it has, which does not hold them. That plan is skipped with one line; the task starts on
the first plan that holds it, and what came meanwhile is handled after it, in order. Effectively
once, a plan without the task never becomes the host's plan before the restore."""

from __future__ import annotations

import dataclasses
import json
import logging
import queue
import threading
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.planner.model import PackingPlan, PhysicalPlan, StmgrLocation, TaskPlacement, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import HostOptions, make_host
from instance.execution import TaskRunner
from instance.metrics import TaskReports
from instance.queues import InItem, InKind, Outbox, OutQueue, QueueBytes

LOG = logging.getLogger("test-plan-wait")


class Words(Spout):
    outputs = ["word"]

    def next_tuple(self) -> None:
        pass


class Count(Bolt):
    outputs: list[str] = []

    def process(self, tup: Any) -> None:
        pass


def _plan(count_par: int, mode: str, version: int = 1) -> PhysicalPlan:
    b = TopologyBuilder("wait")
    w = b.add_spout("words", Words, par=1)
    b.add_bolt("count", Count, par=count_par, inputs={w: Grouping.fields("word")})
    b.set_config({"topology.reliability.mode": mode})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, version)


def _grown(plan: PhysicalPlan, version: int) -> PhysicalPlan:
    """``plan`` with one more count task, with an id above every id in it."""
    count = plan.topology.component("count")
    topo = dataclasses.replace(plan.topology, components=tuple(
        dataclasses.replace(c, par=c.par + 1) if c is count else c for c in plan.topology.components))
    new = TaskPlacement(max(t.task_id for t in plan.packing.tasks) + 1, "count", count.par, 0)
    return PhysicalPlan(topo, PackingPlan(1, (*plan.packing.tasks, new)), plan.stmgrs, plan.state, version)


def _pplan(plan: PhysicalPlan) -> InItem:
    return InKind.PPLAN, json.dumps(plan.to_dict()).encode()


def _runner(task: int, inbound: queue.Queue[InItem], checkpoint_root: Path | None = None) -> TaskRunner:
    in_bytes = QueueBytes(1 << 20)
    outbox = Outbox(OutQueue(64, 1 << 20), QueueBytes(1 << 20), lambda: None)
    return TaskRunner(task_id=task, component="count", package_dir=Path("."), inbound=inbound, in_bytes=in_bytes,
                      outbox=outbox, reports=TaskReports(task, "count", inbound, in_bytes, outbox),
                      mark_ready=lambda: None, log=LOG, topology="wait", checkpoint_root=checkpoint_root)


def _bounded(fn: Any, runner: TaskRunner) -> Any:
    """``fn()`` on a thread, the runner stopped if it has not returned within 10 s."""
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join(timeout=10)
    if t.is_alive():
        runner.stop()
        t.join(timeout=5)
    assert out, "the wait did not return"
    return out[0]


def test_a_plan_without_the_task_is_skipped_and_what_came_meanwhile_is_kept_in_order(
        caplog: pytest.LogCaptureFixture) -> None:
    old = _plan(2, "ATLEAST_ONCE", version=4)
    new = _grown(old, 5)
    task = max(new.packing.tasks_of("count"))  # the task the rescale adds
    inbound: queue.Queue[InItem] = queue.Queue()
    items: list[InItem] = [(InKind.BATCH, b"first"), _pplan(old), (InKind.ACKS, b"second"), (InKind.WAKE, None),
                           _pplan(new), (InKind.BATCH, b"after")]
    for item in items:
        inbound.put(item)
    runner = _runner(task, inbound)
    with caplog.at_level(logging.INFO, logger=LOG.name):
        plan = _bounded(runner._wait_for_plan, runner)
    assert plan == new
    skipped = [r.getMessage() for r in caplog.records if "is not in physical plan" in r.getMessage()]
    assert skipped == [f"task {task} (count) is not in physical plan v4: a rescale started it ahead of its plan; "
                       f"waiting for the plan that adds it"]
    # the items before the plan first, in their order, then what came after it
    assert list(inbound.queue) == [items[0], items[2], items[3], items[5]]


def test_effectively_once_a_plan_without_the_task_does_not_become_the_hosts_before_the_restore(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plan = _plan(2, "EFFECTIVELY_ONCE")
    task = max(plan.packing.tasks_of("count"))
    without = dataclasses.replace(plan, packing=PackingPlan(1, tuple(t for t in plan.packing.tasks
                                                                     if t.task_id != task)), version=2)
    inbound: queue.Queue[InItem] = queue.Queue()
    inbound.put(_pplan(without))
    inbound.put((InKind.RESTORE, (1, 0)))  # a clean start
    runner = _runner(task, inbound, checkpoint_root=tmp_path / "ckpt")
    host = make_host(plan, task, runner.outbox.send, HostOptions())
    with caplog.at_level(logging.INFO, logger=LOG.name):
        assert _bounded(lambda: runner._begin(host), runner) is True
    assert host.plan is plan
    assert f"task {task} (count) is not in physical plan v2; kept plan v1" in [r.getMessage() for r in caplog.records]
    assert runner.stateful is not None and runner.stateful.initialized
