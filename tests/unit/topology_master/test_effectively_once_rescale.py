"""An effectively-once live rescale on the master: the rescale's protocol switches without a
drain (rescale.py, restore mode), the coordinator takes the new plan's tasks and restores the
newest checkpoint onto them (coordinator.replan), and the driver counts only the plan's tasks:
a removed task's exit is no failure, an added task is waited for (checkpoints.py). Pure or on a
real event loop with real storage, as test_checkpoints.py."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from heron_py.checkpoint.coordinator import (
    CheckpointAborted,
    CheckpointCoordinator,
    CoordinatorConfig,
    CoordinatorState,
    Ignored,
    StartProcessing,
    StartRestore,
)
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import MsgType
from heron_py.planner.packing import repack
from proto import heron_py_pb2 as pb
from tests.fakes import plan_book, spout_bolt_topology
from tests.unit.checkpoint.test_coordinator import TASKS, running, save_all
from tests.unit.topology_master.test_checkpoints import Harness, until
from topology_master.rescale import LiveRescale, Phase, Step

GROWN = {**TASKS, 4: "bolt"}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_restore_mode_switches_once_the_added_tasks_are_connected_without_a_drain() -> None:
    book = plan_book()  # s:1 (task 1), b:3 (tasks 2-4) over 2 containers
    topo = spout_bolt_topology(bolt_par=5)
    live = LiveRescale(Clock())
    assert live.begin(book.packing, topo, repack(book.packing, topo), 30.0, restore=True) is None
    assert live.on_instances({1, 2, 3, 4, 5}) is None  # task 6 not connected yet
    assert live.on_instances({1, 2, 3, 4, 5, 6}) is Step.SWITCH
    assert live.phase is Phase.IDLE and live.drain_id == 0  # no drain was asked
    live.finish()
    # a shrink has nothing to wait for: the switch is due at once
    small = spout_bolt_topology(bolt_par=2)
    assert live.begin(book.packing, small, repack(book.packing, small), 30.0, restore=True) is None
    assert live.on_instances(set()) is Step.SWITCH


def test_restore_mode_switches_without_a_task_that_never_connects() -> None:
    book = plan_book()
    topo = spout_bolt_topology(bolt_par=5)
    clock = Clock()
    live = LiveRescale(clock, stage_wait_s=10.0)
    live.begin(book.packing, topo, repack(book.packing, topo), 30.0, restore=True)
    clock.now += 9.9
    assert live.tick() is None
    clock.now += 0.1
    assert live.tick() is Step.SWITCH
    assert live.note == "added tasks not connected after 10 s; switching without them"
    # the next rescale drains again unless it asks for restore mode
    live.finish()
    assert live.begin(book.packing, topo, repack(book.packing, topo), 30.0) is None
    assert live.on_instances({5, 6}) is Step.DRAIN


def test_replan_restores_the_newest_checkpoint_onto_the_new_tasks() -> None:
    c = running()
    assert c.tick(10)[0].checkpoint_id == 1  # type: ignore[attr-defined]
    save_all(c, 1, 11)
    c.tick(20)  # checkpoint 2 in flight, under the old plan
    out = c.replan(21, GROWN, "plan v5, 4 tasks")
    assert out == [CheckpointAborted(2, "rescale: plan v5, 4 tasks"),
                   StartRestore(2, 1, "rescale: plan v5, 4 tasks")]
    assert c.state is CoordinatorState.RESTORING and c.status().tasks == 4
    assert c.status().consecutive_failures == 0  # a rescale is not a failure
    for t in TASKS:
        assert c.on_task_restored(2, t, True, 22) == []
    # the added task is waited for, then everyone processes
    assert c.on_task_restored(2, 4, True, 23) == [StartProcessing(2, 1)]
    # the next checkpoint counts the new tasks' saves
    c.tick(40)
    for t in TASKS:
        c.on_task_saved(3, t, 10, 0.1, now=41)
    assert c.state is CoordinatorState.CHECKPOINTING
    assert len(c.on_task_saved(3, 4, 10, 0.1, now=42)) == 1


def test_replan_of_a_shrink_no_longer_waits_for_the_removed_task() -> None:
    c = running()
    out = c.replan(5, {1: "spout", 2: "bolt"}, "plan v3, 2 tasks")
    assert out == [StartRestore(2, None, "rescale: plan v3, 2 tasks")]  # nothing complete: a clean start
    assert c.on_task_restored(2, 3, True, 6) == [
        Ignored("task 3 restored for restore 2: not a task of the plan")]
    c.on_task_restored(2, 1, True, 6)
    assert c.on_task_restored(2, 2, True, 6) == [StartProcessing(2, None)]


def test_replan_before_the_first_restore_only_takes_the_tasks_and_waits_for_the_operator_restores_nothing() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=10), TASKS)
    assert c.replan(0, GROWN, "plan v2, 4 tasks") == []
    assert c.state is CoordinatorState.STARTING
    (restore,) = c.start(1)
    assert isinstance(restore, StartRestore) and c.status().tasks == 4
    # a storage that does not show what completed: the operator decides first
    w = CheckpointCoordinator(CoordinatorConfig(interval_secs=10), TASKS, recorded=7)
    w.start(0)
    assert w.state is CoordinatorState.WAITING_FOR_OPERATOR
    (ignored,) = w.replan(1, GROWN, "plan v2, 4 tasks")
    assert isinstance(ignored, Ignored) and ignored.reason.startswith(
        "rescale (plan v2, 4 tasks) while waiting for the operator: checkpoint 7 completed")
    assert w.status().tasks == 4  # the operator's restore goes to the new tasks


def test_the_driver_counts_the_new_plans_tasks_and_a_removed_tasks_exit_is_no_failure(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    async def run() -> None:
        clock = Clock()
        h = Harness(LocalFsStorage(tmp_path), epoch=1, clock=clock)  # tasks 1 (spout), 2 (bolt)
        await h.start()
        await h.processing()
        assert h.driver.rescale_blocker() is None
        # task 3 was added and connected before the switch: not the plan's yet, no failure
        h.driver.on_instances({1: {"pid": 101, "ready": True}, 2: {"pid": 102, "ready": True},
                               3: {"pid": 103, "ready": True}})
        assert len(h.frames(MsgType.RESTORE_STATE)) == 1
        # ... and one that restarts before the switch is no failure either: nothing of it counted yet
        h.driver.on_instances({1: {"pid": 101, "ready": True}, 2: {"pid": 102, "ready": True},
                               3: {"pid": 0, "ready": False}})
        h.driver.on_instances({1: {"pid": 101, "ready": True}, 2: {"pid": 102, "ready": True},
                               3: {"pid": 113, "ready": True}})
        assert len(h.frames(MsgType.RESTORE_STATE)) == 1
        caplog.set_level(logging.INFO, logger="test.checkpoints")
        h.driver.replan({1: "spout", 3: "bolt"}, "plan v3, 2 tasks")  # 2 removed, 3 kept
        assert ("INFO", "effectively once: rescale (plan v3, 2 tasks): every task restores under the new plan") in [
            (r.levelname, r.getMessage()) for r in caplog.records]
        restores = h.frames(MsgType.RESTORE_STATE)
        assert len(restores) == 2 and restores[-1].reason == "rescale: plan v3, 2 tasks"
        await h.driver_ticks(3)  # the restore under way is ticked (it times out on the driver's clock)
        # the removed task exits, and a kept one dies: only the kept one is a failure
        h.driver.on_instances({1: {"pid": 0, "ready": False}, 3: {"pid": 113, "ready": True}})
        restores = h.frames(MsgType.RESTORE_STATE)
        assert len(restores) == 3 and restores[-1].reason == "failure: task 1 (pid 101) is gone"
        # the restore's time is the driver's clock: it times out from the switch's failure on it
        assert h.driver.coordinator is not None
        clock.now += h.driver.coordinator.config.restore_timeout_secs
        await until(lambda: len(h.frames(MsgType.RESTORE_STATE)) == 4)
        rid = int(h.frames(MsgType.RESTORE_STATE)[-1].restore_id)
        h.driver.on_instances({1: {"pid": 121, "ready": True}, 3: {"pid": 113, "ready": True}})
        for t in (1, 3):
            h.driver.on_report(pb.StateRestored(restore_id=rid, task_id=t, ok=True))
        await until(lambda: any(p.restore_id == rid for p in h.frames(MsgType.START_PROCESSING)))
        await h.stop()

    asyncio.run(run())


def test_a_replan_before_the_first_restore_while_the_master_cannot_act_counts_the_new_tasks(tmp_path: Path) -> None:
    async def run() -> None:
        acting = {"session": True}
        h = Harness(LocalFsStorage(tmp_path), epoch=1, session_ok=lambda: acting["session"])
        h.task = asyncio.create_task(h.driver.run(h.stopped, period_s=0.01))
        await until(lambda: h.driver.coordinator is not None)  # starting: no task ready yet
        acting["session"] = False
        h.driver.replan({1: "spout", 2: "bolt", 3: "bolt"}, "plan v2, 3 tasks")
        assert h.driver.coordinator is not None and h.driver.coordinator.status().tasks == 3
        assert h.driver.coordinator.state is CoordinatorState.STARTING
        acting["session"] = True
        h.driver.on_instances({1: {"pid": 101, "ready": True}, 2: {"pid": 102, "ready": True}})
        await h.driver_ticks(5)
        assert h.frames(MsgType.RESTORE_STATE) == []  # task 3 of the new plan is not ready yet
        h.driver.on_instances({1: {"pid": 101, "ready": True}, 2: {"pid": 102, "ready": True},
                               3: {"pid": 103, "ready": True}})
        await until(lambda: len(h.frames(MsgType.RESTORE_STATE)) == 1)
        await h.stop()

    asyncio.run(run())


def test_a_rescale_waits_for_the_operator_as_every_restore_does(tmp_path: Path) -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=10), TASKS, recorded=7)

    async def run() -> None:
        h = Harness(LocalFsStorage(tmp_path), epoch=1)
        await h.start()
        await h.processing()
        h.driver.coordinator = c  # a coordinator that waits for the operator
        c.start(0)
        assert h.driver.rescale_blocker() == (
            "effectively once waits for the operator (heron-py restore NAME --checkpoint ID | --clean) before "
            "anything restores")
        await h.stop()

    asyncio.run(run())


def test_a_rescale_is_refused_while_the_driver_cannot_restore(tmp_path: Path) -> None:
    async def run() -> None:
        lost = {"session": True}
        h = Harness(LocalFsStorage(tmp_path), epoch=1, session_ok=lambda: lost["session"])
        assert h.driver.rescale_blocker() == "the checkpoint storage is not listed yet (in progress); try again"
        await h.start()
        await h.processing()
        lost["session"] = False
        assert h.driver.rescale_blocker() == "this master may not restore (its state-manager session is lost)"
        # a switch that came anyway is restored once the master may act, onto the new tasks
        h.driver.replan({1: "spout", 2: "bolt", 3: "bolt"}, "plan v3, 3 tasks")
        assert len(h.frames(MsgType.RESTORE_STATE)) == 1
        lost["session"] = True
        await until(lambda: len(h.frames(MsgType.RESTORE_STATE)) == 2)
        assert h.driver.coordinator is not None and h.driver.coordinator.status().tasks == 3
        await h.stop()

    asyncio.run(run())


def test_replan_needs_a_task_and_its_restore_times_out_from_the_switch() -> None:
    c = running(restore_timeout_secs=30)
    with pytest.raises(ValueError) as e:
        c.replan(1, {}, "plan v2, 0 tasks")
    assert str(e.value) == "checkpoint coordinator: a topology needs at least one task, found none"
    (restore,) = c.replan(100, GROWN, "plan v2, 4 tasks")
    assert isinstance(restore, StartRestore)
    assert c.tick(129.9) == []  # task 4 not restored yet: 30 s from the switch, not from 0
    (again,) = c.tick(130)
    assert isinstance(again, StartRestore) and again.reason == (
        "restore 2 timed out after 30s waiting for tasks [1, 2, 3, 4]")
