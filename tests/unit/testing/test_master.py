"""heron_py.testing.master.SimulatedMaster: the real CheckpointCoordinator, driven on a manual
clock over fake tasks. When the master says the coordinator next acts (``next_wake``) must be
exactly when it does, since the harness's clock jumps from one such time to the next."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest

from heron_py.checkpoint.coordinator import CheckpointCoordinator, CoordinatorConfig, CoordinatorState
from heron_py.testing.harness import ManualClock, MemoryStorage
from heron_py.testing.master import SimulatedMaster
from proto import heron_py_pb2 as pb

TASKS = {1: "spout", 2: "bolt"}
T0 = 1_000_000.0


@dataclass
class Tasks:
    """The cluster: records the master's commands; ``answer`` makes the tasks reply at once."""

    commands: list[tuple[str, int, int]] = field(default_factory=list)
    master: SimulatedMaster | None = None
    answer: bool = True
    restore_error: str = ""

    def start_checkpoint(self, checkpoint_id: int) -> None:
        self.commands.append(("checkpoint", checkpoint_id, 0))

    def restore(self, restore_id: int, checkpoint_id: int) -> None:
        self.commands.append(("restore", restore_id, checkpoint_id))
        if self.answer and self.master is not None:
            for t in TASKS:
                ok = not (self.restore_error and t == 2)
                self.master.on_message(pb.StateRestored(restore_id=restore_id, task_id=t, ok=ok,
                                                        error="" if ok else self.restore_error))

    def start_processing(self, restore_id: int) -> None:
        self.commands.append(("process", restore_id, 0))

    def committed(self, checkpoint_id: int) -> None:
        self.commands.append(("committed", checkpoint_id, 0))


@dataclass
class Record:
    checkpoints: list[int] = field(default_factory=list)
    restores: list[int] = field(default_factory=list)


def started(interval: float = 10.0, timeout: float | None = None, **config: object
            ) -> tuple[SimulatedMaster, Tasks, Record, ManualClock, MemoryStorage]:
    clock, tasks, record, storage = ManualClock(T0), Tasks(), Record(), MemoryStorage()
    coordinator = CheckpointCoordinator(CoordinatorConfig(interval, timeout, **config), TASKS)  # type: ignore[arg-type]
    master = SimulatedMaster(coordinator, storage, "topo", tasks, record, clock)
    tasks.master = master
    master.start()
    return master, tasks, record, clock, storage


def save(storage: MemoryStorage, master: SimulatedMaster, checkpoint_id: int, *task_ids: int) -> None:
    """The tasks save their state and report it, as StatefulTask does."""
    for t in task_ids:
        storage.save("topo", checkpoint_id, t, b"state")
        master.on_message(pb.CheckpointSaved(checkpoint_id=checkpoint_id, task_id=t, stored=True))


def test_a_checkpoint_starts_exactly_at_next_wake_and_completes_into_the_storage() -> None:
    master, tasks, record, clock, storage = started()
    assert tasks.commands == [("restore", 1, 0), ("process", 1, 0)] and record.restores == []  # the start
    assert master.next_wake() == T0 + 10
    clock.t = T0 + 10 - 1e-6
    master.tick()
    assert tasks.commands[-1] == ("process", 1, 0)  # not a moment early
    clock.t = T0 + 10
    master.tick()
    assert tasks.commands[-1] == ("checkpoint", 1, 0)
    save(storage, master, 1, 1, 2)
    assert record.checkpoints == [1] and tasks.commands[-1] == ("committed", 1, 0)
    assert storage.completed_ids("topo") == [1] and storage.marker("topo", 1).tasks == {1, 2}
    assert master.next_wake() == T0 + 20


def test_a_checkpoint_a_task_never_saves_times_out_and_failures_in_a_row_are_counted(
        caplog: pytest.LogCaptureFixture) -> None:
    master, _, record, clock, storage = started(interval=10.0, timeout=4.0, max_consecutive_failures=2)
    with caplog.at_level(logging.WARNING, logger="heron_py.testing.master"):
        for n in (1, 2):
            clock.t = master.next_wake() or 0.0
            master.tick()  # the checkpoint starts
            save(storage, master, n, 1)  # task 2 never saves
            assert master.next_wake() == clock.t + 4  # its timeout
            clock.t += 4
            master.tick()
    assert record.checkpoints == [] and master.coordinator.status().failing
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "checkpoint 1 aborted", "checkpoint 2 aborted", "effectively once"]


def test_a_failed_save_aborts_the_checkpoint_at_once() -> None:
    master, _, record, clock, _ = started()
    clock.t = T0 + 10
    master.tick()
    master.on_message(pb.CheckpointSaved(checkpoint_id=1, task_id=2, failed=True, error="disk full"))
    assert master.coordinator.state is CoordinatorState.IDLE and master.coordinator.status().consecutive_failures == 1
    assert master.next_wake() == T0 + 20 and record.checkpoints == []


def test_checkpoint_now_starts_one_at_once_and_the_next_is_due_an_interval_later() -> None:
    master, tasks, record, clock, storage = started()
    clock.t = T0 + 3
    assert master.checkpoint_now() == 1 and tasks.commands[-1] == ("checkpoint", 1, 0)
    save(storage, master, 1, 1, 2)
    assert record.checkpoints == [1] and master.next_wake() == T0 + 13


def test_a_failure_rolls_back_to_the_newest_complete_checkpoint_and_is_recorded() -> None:
    master, tasks, record, clock, storage = started()
    master.checkpoint_now()
    save(storage, master, 1, 1, 2)
    clock.t = T0 + 5
    master.on_failure("task 2 killed")
    assert tasks.commands[-2:] == [("restore", 2, 1), ("process", 2, 0)] and record.restores == [1]
    assert master.next_wake() == T0 + 15  # the restore restarted the interval


def test_a_transient_restore_error_is_retried_after_the_backoff() -> None:
    master, tasks, record, clock, storage = started()
    master.checkpoint_now()
    save(storage, master, 1, 1, 2)
    tasks.restore_error = "TimeoutError: the storage is slow"
    master.on_failure("task 2 killed")
    assert master.coordinator.state is CoordinatorState.RESTORING and master.next_wake() == clock.t + 1.0
    tasks.restore_error = ""
    clock.t = master.next_wake() or 0.0
    master.tick()
    assert tasks.commands[-2:] == [("restore", 3, 1), ("process", 3, 0)] and record.restores == [1]


def test_no_checkpoint_to_restore_is_an_assertion_error_where_the_master_would_wait_for_the_operator() -> None:
    master, tasks, _, _, _ = started()
    tasks.restore_error = "CorruptCheckpointError: bad"
    with pytest.raises(AssertionError, match="no checkpoint could be restored: task 2 could not restore a clean start"):
        master.on_failure("task 2 killed")


def test_checkpoint_now_while_one_is_under_way_says_so() -> None:
    master, _, _, _, _ = started()
    master.checkpoint_now()
    with pytest.raises(AssertionError, match="found it checkpointing"):
        master.checkpoint_now()
    assert master.saved(1) == []


def test_a_message_the_master_does_not_take_is_an_assertion_error() -> None:
    master, _, _, _, _ = started()
    with pytest.raises(AssertionError, match="no handler for a task's StartProcessing"):
        master.on_message(pb.StartProcessing(restore_id=1))
