"""A stream manager's rollback request and a task's restart must never be lost on the way to
the master: not while the master may not act (its state-manager session suspended, as when
ZooKeeper restarts), and a checkpoint committing when a loss is reported never becomes a
restore target. The driver runs on a real event loop, real storage and its I/O thread."""

from __future__ import annotations

from pathlib import Path

from heron_py.checkpoint.coordinator import (
    CheckpointCommitted,
    CheckpointComplete,
    CheckpointCoordinator,
    CheckpointDiscarded,
    CheckpointsFailing,
    CoordinatorConfig,
    StartRestore,
)
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import MsgType
from heron_py.common.wire import decode
from proto import heron_py_pb2 as pb
from tests.support import mark_saved
from tests.unit.topology_master.test_checkpoints import TASKS, TOPOLOGY, Harness, save_files, until


def _answers(frames: list[bytes]) -> list[tuple[int, bool]]:
    out = []
    for f in frames:
        m = decode(MsgType.ROLLBACK_ANSWER, f, "the driver")
        assert isinstance(m, pb.RollbackAnswer)
        out.append((m.restore_id, m.acted))
    return out


async def test_a_request_during_a_suspended_session_is_acted_on_when_the_session_is_back(tmp_path: Path) -> None:
    session = {"up": True}
    h = Harness(LocalFsStorage(tmp_path), epoch=1, session_ok=lambda: session["up"])
    await h.start()
    rid = await h.processing()
    restores = len(h.frames(MsgType.RESTORE_STATE))
    session["up"] = False  # ZooKeeper restarting: SUSPENDED, not lost
    answered: list[bytes] = []
    h.driver.on_rollback_request(2, rid, "the connection to stream manager 1 closed", answered.append)
    await h.driver_ticks(5)
    assert answered == [] and len(h.frames(MsgType.RESTORE_STATE)) == restores  # kept, not acted on, not dropped
    session["up"] = True
    await until(lambda: len(h.frames(MsgType.RESTORE_STATE)) == restores + 1)
    assert "stream manager 2: the connection to stream manager 1 closed" in h.frames(MsgType.RESTORE_STATE)[-1].reason
    assert _answers(answered) == [(rid, True)]
    await h.stop()


async def test_a_moot_request_is_answered_so_the_stream_manager_stops_asking(tmp_path: Path) -> None:
    h = Harness(LocalFsStorage(tmp_path), epoch=1)
    await h.start()
    rid = await h.processing()
    answered: list[bytes] = []
    h.driver.on_rollback_request(0, rid - 1, "an older run", answered.append)
    assert _answers(answered) == [(rid - 1, False)]
    h.driver.on_rollback_request(0, rid, "the current run", answered.append)
    assert _answers(answered)[-1] == (rid, True)
    await until(lambda: h.driver.coordinator is not None and h.driver.coordinator.state.value == "restoring")
    new = int(h.frames(MsgType.RESTORE_STATE)[-1].restore_id)
    h.driver.on_rollback_request(1, new, "during the restore", answered.append)  # no task processes yet
    assert _answers(answered)[-1] == (new, False)
    await h.stop()


async def test_a_task_restarted_during_a_suspended_session_is_rolled_back_after_it(tmp_path: Path) -> None:
    """The pid changed while the master could not act: remembered, and every task rolls back
    once it can (without it the restarted task waited for a restore forever)."""
    session = {"up": True}
    h = Harness(LocalFsStorage(tmp_path), epoch=1, session_ok=lambda: session["up"])
    await h.start()
    await h.processing()
    restores = len(h.frames(MsgType.RESTORE_STATE))
    session["up"] = False
    h.driver.on_instances({1: {"pid": 555, "ready": True}, 2: {"pid": 102, "ready": True}}, "heartbeat")
    await h.driver_ticks(5)
    assert len(h.frames(MsgType.RESTORE_STATE)) == restores
    session["up"] = True
    await until(lambda: len(h.frames(MsgType.RESTORE_STATE)) == restores + 1)
    assert "task 1 (pid 101) restarted" in h.frames(MsgType.RESTORE_STATE)[-1].reason
    await h.stop()


async def test_the_first_restore_starts_when_the_session_comes_back(tmp_path: Path) -> None:
    """Every task became ready while the session was down: the first restore starts when it is
    back, not only at the next change of the tasks."""
    session = {"up": False}
    h = Harness(LocalFsStorage(tmp_path), epoch=1, session_ok=lambda: session["up"])
    await h.start()  # every task ready, reported while the master may not act
    await h.driver_ticks(5)
    assert h.frames(MsgType.RESTORE_STATE) == []
    session["up"] = True
    await until(lambda: bool(h.frames(MsgType.RESTORE_STATE)))
    await h.stop()


def test_a_checkpoint_committing_when_data_is_lost_is_discarded_not_a_target() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=1.0), TASKS, completed=[3], first_id=4)
    c.start(0.0)
    c.on_task_restored(1, 1, True, 0.1)
    c.on_task_restored(1, 2, True, 0.1)
    [start] = c.tick(2.0)
    cid = start.checkpoint_id
    c.on_task_saved(cid, 1, 1, 0.0, 2.1)
    [done] = c.on_task_saved(cid, 2, 1, 0.0, 2.2)
    assert isinstance(done, CheckpointComplete)
    [restore] = c.on_failure(2.3, "stream manager 1: frames dropped (held-overflow)", data_lost=True)
    assert isinstance(restore, StartRestore) and restore.checkpoint_id == 3
    assert c.on_marked(cid, 2.4) == [CheckpointDiscarded(cid, "in-flight data was lost while it committed: "
                                                              "stream manager 1: frames dropped (held-overflow)")]
    assert c.completed == (3,)


def test_a_task_failure_while_committing_keeps_the_checkpoint_a_target() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=1.0), TASKS, completed=[3], first_id=4)
    c.start(0.0)
    c.on_task_restored(1, 1, True, 0.1)
    c.on_task_restored(1, 2, True, 0.1)
    [start] = c.tick(2.0)
    cid = start.checkpoint_id
    c.on_task_saved(cid, 1, 1, 0.0, 2.1)
    c.on_task_saved(cid, 2, 1, 0.0, 2.2)
    c.on_failure(2.3, "task 2 (pid 102) restarted")  # behind its own saved cut: nothing lost
    out = c.on_marked(cid, 2.4)
    assert isinstance(out[0], CheckpointCommitted) and c.completed == (3, cid)


async def test_the_discarded_checkpoint_leaves_the_storage(tmp_path: Path) -> None:
    """Its marker landed after the loss: a successor master listing the storage must not find
    it complete either."""
    storage = LocalFsStorage(tmp_path)
    h = Harness(storage, epoch=1)
    await h.start()
    rid = await h.processing()
    cid = await h.next_checkpoint()
    save_files(storage, cid)
    mark_saved(storage, TOPOLOGY, cid)  # the marker is durable, as if written before the loss was heard
    assert cid in storage.completed_ids(TOPOLOGY)
    coord = h.driver.coordinator
    assert coord is not None
    h.saved(cid)  # committing now: the driver writes the marker on its I/O thread
    h.driver.on_rollback_request(0, rid, "frames dropped (held-overflow)")
    await until(lambda: cid not in storage.completed_ids(TOPOLOGY))
    assert cid not in coord.completed
    await h.stop()


def test_a_restore_loop_counts_toward_the_failure_limit() -> None:
    """A task that keeps crashing before the restore ends: each crash restarts the restore, and
    at topology.stateful.max.consecutive.failures the status says FAILING (no checkpoint ever
    fails in that loop, since none starts)."""
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=1.0, max_consecutive_failures=3), TASKS,
                              completed=[3], first_id=4)
    c.start(0.0)
    c.on_failure(1.0, "task 2 (pid 7) restarted")
    assert not c.status().failing
    c.on_failure(2.0, "task 2 (pid 8) restarted")
    out = c.on_failure(3.0, "task 2 (pid 9) restarted")
    assert c.status().failing and c.status().consecutive_failures == 3
    assert any(isinstance(a, CheckpointsFailing) for a in out)
    assert c.status().failure_reasons[-1] == "checkpoint 3: restore interrupted: task 2 (pid 9) restarted"
