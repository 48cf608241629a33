"""The master's checkpoint state machine (issue 17): completion, timeout, restore, clean start, ids."""

from __future__ import annotations

import pytest

from heron_py.checkpoint.coordinator import (
    CheckpointAborted,
    CheckpointCommitted,
    CheckpointComplete,
    CheckpointCoordinator,
    ComponentStats,
    CoordinatorConfig,
    CoordinatorState,
    Ignored,
    RestoreFailed,
    RestoreRetry,
    StartCheckpoint,
    StartProcessing,
    StartRestore,
)
from heron_py.common.config import ConfigError

TASKS = {1: "spout", 2: "bolt", 3: "bolt"}


def running(completed: tuple[int, ...] = (), **cfg: object) -> CheckpointCoordinator:
    """A coordinator past its start-up restore, processing at t=0."""
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=10, **cfg), TASKS, completed)  # type: ignore[arg-type]
    (restore,) = c.start(0)
    assert isinstance(restore, StartRestore)
    for t in TASKS:
        out = c.on_task_restored(restore.restore_id, t, True, 0)
    assert out == [StartProcessing(restore.restore_id, restore.checkpoint_id)]
    return c


def save_all(c: CheckpointCoordinator, cid: int, now: float) -> list[object]:
    """Every task saves ``cid`` and its marker is durable."""
    out: list[object] = []
    for t in TASKS:
        out += c.on_task_saved(cid, t, size_bytes=100 * t, duration_secs=0.1 * t, now=now)
    return out + c.on_marked(cid, now)


def test_checkpoint_starts_on_interval_and_completes_when_every_task_saved() -> None:
    c = running()
    assert c.state is CoordinatorState.IDLE
    assert c.tick(9.9) == []
    assert c.tick(10) == [StartCheckpoint(1)]
    assert c.tick(11) == []  # one at a time
    assert c.on_task_saved(1, 1, 10, 0.5, now=12) == []
    assert c.on_task_saved(1, 1, 10, 0.5, now=12) == []  # a duplicate report counts once
    assert c.status().in_progress_saved == 1
    assert c.on_task_saved(1, 2, 20, 0.25, now=13) == []
    (done,) = c.on_task_saved(1, 3, 30, 0.75, now=14)
    assert isinstance(done, CheckpointComplete)
    assert (done.checkpoint.checkpoint_id, done.checkpoint.duration_secs, done.checkpoint.size_bytes) == (1, 4, 60)
    # not complete until its marker is durable (issue 37)
    assert (c.state, c.status().last_completed_id, c.tick(20)) == (CoordinatorState.COMMITTING, None, [])
    assert c.on_marked(1, 14) == [CheckpointCommitted(1, (1,))]
    s = c.status()
    assert (s.state, s.last_completed_id, s.last_completed_at, s.last_duration_secs, s.last_size_bytes) == (
        CoordinatorState.IDLE, 1, 14, 4, 60)
    assert s.components == (ComponentStats("bolt", 2, 50, 0.75), ComponentStats("spout", 1, 10, 0.5))
    assert c.tick(19.9) == []
    assert c.tick(30) == [StartCheckpoint(2)]


def test_late_unknown_and_stale_saves_are_ignored() -> None:
    c = running()
    c.tick(10)
    assert c.on_task_saved(1, 99, 1, 0, now=11) == [Ignored("task 99 saved checkpoint 1: not a task of the plan")]
    assert c.on_task_saved(0, 1, 1, 0, now=11) == [
        Ignored("task 1 saved checkpoint 0: not under way (state checkpointing, under way 1)")]


def test_checkpoint_that_does_not_complete_in_time_is_aborted_and_the_next_gets_a_new_id() -> None:
    c = running(timeout_secs=5)
    c.tick(10)
    c.on_task_saved(1, 1, 1, 0, now=11)
    assert c.tick(15) == [CheckpointAborted(1, "timed out after 5s waiting for tasks [2, 3]")]
    assert c.state is CoordinatorState.IDLE
    assert c.on_task_saved(1, 2, 1, 0, now=16)[0] == Ignored(
        "task 2 saved checkpoint 1: not under way (state idle, under way none)")
    assert c.tick(20) == [StartCheckpoint(2)]
    assert c.status().last_completed_id is None


def test_default_timeout_is_the_interval_so_the_next_one_replaces_it() -> None:
    c = running()
    c.tick(10)
    assert c.tick(20) == [CheckpointAborted(1, "timed out after 10s waiting for tasks [1, 2, 3]"), StartCheckpoint(2)]


def test_failure_aborts_the_checkpoint_and_restores_the_last_completed() -> None:
    c = running()
    c.tick(10)
    save_all(c, 1, 11)
    c.tick(21)
    out = c.on_failure(22, "stream manager on host-2 lost")
    assert out == [CheckpointAborted(2, "failure: stream manager on host-2 lost"),
                   StartRestore(2, 1, "failure: stream manager on host-2 lost")]
    assert c.state is CoordinatorState.RESTORING
    assert c.tick(100) == []  # no checkpoint while restoring (restore timeout is 120s)
    assert c.on_task_saved(2, 1, 1, 0, now=23)[0] == Ignored(
        "task 1 saved checkpoint 2: not under way (state restoring, under way none)")
    assert c.on_task_restored(1, 1, True, 23) == [
        Ignored("task 1 restored for restore 1: not under way (under way 2)")]
    assert c.on_task_restored(2, 1, True, 23) == []
    assert c.on_task_restored(2, 2, True, 23) == []
    assert c.status().restore_checkpoint_id == 1
    assert c.on_task_restored(2, 3, True, 24) == [StartProcessing(2, 1)]
    assert c.tick(33.9) == []
    assert c.tick(34) == [StartCheckpoint(3)]  # never reuses id 2


def test_failure_before_any_completed_checkpoint_is_a_clean_start() -> None:
    c = running()
    c.tick(10)
    assert c.on_failure(12, "task 3 died")[-1] == StartRestore(2, None, "failure: task 3 died")


def test_start_restores_the_newest_completed_or_starts_clean() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=5), TASKS, completed=[4, 7, 6])
    assert c.state is CoordinatorState.STARTING
    assert c.tick(100) == []
    assert c.start(0) == [StartRestore(1, 7, "topology start")]
    assert c.start(0) == [Ignored("start in state restoring, expected starting")]
    clean = CheckpointCoordinator(CoordinatorConfig(interval_secs=5, start_clean=True), TASKS, completed=[7])
    assert clean.start(0) == [StartRestore(1, None, "topology start (topology.stateful.start.clean)")]
    for t in TASKS:
        clean.on_task_restored(1, t, True, 0)
    assert clean.tick(5) == [StartCheckpoint(8)]  # above the old ids even when their state is ignored
    # ...and a later failure does not bring the previous run's state back
    assert clean.on_failure(6, "x")[-1] == StartRestore(2, None, "failure: x")


def test_a_task_that_cannot_load_falls_back_to_older_then_waits_for_the_operator() -> None:
    """Issue 37: never a clean start on its own; the operator decides."""
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=5), TASKS, completed=[3, 4])
    c.start(0)
    assert c.on_task_restored(1, 2, False, 1, error="CorruptCheckpointError: checksum mismatch") == [
        StartRestore(2, 3, "task 2 could not restore checkpoint 4: CorruptCheckpointError: checksum mismatch; "
                           "falling back to checkpoint 3")]
    waiting = ("task 1 could not restore checkpoint 3; no other checkpoint to fall back to: waiting for the "
               "operator (heron-py restore NAME --checkpoint ID | --clean)")
    assert c.on_task_restored(2, 1, False, 2) == [RestoreFailed(waiting)]
    assert c.state is CoordinatorState.WAITING_FOR_OPERATOR
    assert c.state.value == "waiting for the operator"
    assert c.status().failure == waiting
    assert c.on_failure(4, "y") == [Ignored(f"failure (y) while waiting for the operator: {waiting}")]
    assert c.tick(500) == []  # waits, however long
    assert c.operator_restore(600, None) == [StartRestore(3, None, "operator: heron-py restore (a clean start)")]
    for t in TASKS:
        out = c.on_task_restored(3, t, True, 601)
    assert out == [StartProcessing(3, None)] and c.status().failure is None
    # a clean start the operator chose that fails again waits again
    c.on_failure(602, "z")
    assert c.on_task_restored(4, 1, False, 603, error="init_state raised") == [RestoreFailed(
        "task 1 could not restore a clean start: init_state raised; no other checkpoint to fall back to: waiting "
        "for the operator (heron-py restore NAME --checkpoint ID | --clean)")]


def test_restore_that_hangs_is_issued_again() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=5, restore_timeout_secs=30), TASKS)
    c.start(0)
    c.on_task_restored(1, 1, True, 1)
    assert c.tick(30) == [StartRestore(2, None, "restore 1 timed out after 30s waiting for tasks [2, 3]")]


def test_ids_are_strictly_increasing_and_start_above_the_storage() -> None:
    c = running(completed=(2,))
    ids = []
    now = 0.0
    for _ in range(5):
        now += 10
        (start,) = c.tick(now)
        assert isinstance(start, StartCheckpoint)
        ids.append(start.checkpoint_id)
        if start.checkpoint_id % 2:
            save_all(c, start.checkpoint_id, now)
        else:
            c.on_failure(now, "flaky")
            for t in TASKS:
                c.on_task_restored(_restore_id(c), t, True, now)
    assert ids == [3, 4, 5, 6, 7]
    assert c.status().last_completed_id == 7
    later = CheckpointCoordinator(CoordinatorConfig(interval_secs=5), TASKS, completed=[7], first_id=12)
    later.start(0)
    for t in TASKS:
        later.on_task_restored(1, t, True, 0)
    assert later.tick(5) == [StartCheckpoint(12)]
    with pytest.raises(ValueError, match="first_id must be above the newest completed checkpoint 7, found 7"):
        CheckpointCoordinator(CoordinatorConfig(interval_secs=5), TASKS, completed=[7], first_id=7)


def _restore_id(c: CheckpointCoordinator) -> int:
    assert c.state is CoordinatorState.RESTORING
    r = c._restore
    assert r is not None
    return r.restore_id


def test_config_comes_from_the_config_table() -> None:
    """One reader (heron_py/common/config.py's table), issue 37: the restore timeout and the
    failure limit are keys there; from_topology_config is gone."""
    assert not hasattr(CoordinatorConfig, "from_topology_config")
    conf = {"topology.stateful.checkpoint.interval.seconds": 30, "topology.stateful.start.clean": "true",
            "topology.stateful.restore.timeout.seconds": 45, "topology.stateful.max.consecutive.failures": 5}
    cfg = CoordinatorConfig.from_config(conf)
    assert (cfg.interval_secs, cfg.effective_timeout_secs, cfg.start_clean, cfg.restore_timeout_secs,
            cfg.max_consecutive_failures) == (30, 60, True, 45, 5)
    default = CoordinatorConfig.from_config({})
    assert (default.interval_secs, default.restore_timeout_secs, default.max_consecutive_failures) == (30, 120, 3)
    with pytest.raises(ConfigError) as e:
        CoordinatorConfig.from_config({"topology.stateful.max.consecutive.failures": 0})
    assert "topology.stateful.max.consecutive.failures" in str(e.value)
    with pytest.raises(ValueError, match="interval_secs must be > 0, found 0"):
        CoordinatorConfig(interval_secs=0)


# --- issue 37: transient restore errors, the operator, the failure manager ---

def test_transient_load_errors_retry_the_same_checkpoint_with_backoff_never_a_clean_start() -> None:
    """Hole 3: with keep=2, two transient errors used to give an automatic clean start."""
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=5, keep_completed=2), TASKS, completed=[3, 4])
    (first,) = c.start(0)
    assert first == StartRestore(1, 4, "topology start")
    stale = "TransientCheckpointError: checkpoint 4 of topology 'wc': task 2's state: ESTALE Stale file handle (x)"
    assert c.on_task_restored(1, 2, False, 1, error=stale) == [RestoreRetry(1, 4, 1, 1.0, f"task 2: {stale}")]
    assert c.on_task_restored(1, 3, True, 1.1) == [
        Ignored("task 3 restored for restore 1: a retry is already scheduled")]
    assert c.tick(1.9) == []
    assert c.tick(2) == [StartRestore(2, 4, f"retry 1 after a transient error: task 2: {stale}")]
    assert c.on_task_restored(2, 1, False, 3, error="MemoryError: ") == [
        RestoreRetry(2, 4, 2, 2.0, "task 1: MemoryError: ")]
    assert (c.status().restore_attempt, c.status().restore_error) == (2, "task 1: MemoryError: ")
    assert c.tick(5) == [StartRestore(3, 4, "retry 2 after a transient error: task 1: MemoryError: ")]
    eio = "OSError: [Errno 5] Input/output error: '/ckpt/wc/4/1'"
    assert c.on_task_restored(3, 1, False, 6, error=eio)[0] == RestoreRetry(3, 4, 3, 4.0, f"task 1: {eio}")
    assert c.completed == (3, 4)  # nothing dropped for a transient error
    assert c.tick(10) == [StartRestore(4, 4, f"retry 3 after a transient error: task 1: {eio}")]
    for t in TASKS:
        out = c.on_task_restored(4, t, True, 11)
    assert out == [StartProcessing(4, 4)]
    assert c.status().loaded_id == 4


def test_backoff_is_capped_so_a_long_outage_is_still_retried() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=5, retry_max_secs=8), TASKS, completed=[4])
    c.start(0)
    now, delays = 0.0, []
    for rid in range(1, 7):
        (retry,) = c.on_task_restored(rid, 1, False, now, error="MemoryError: ")
        assert isinstance(retry, RestoreRetry)
        delays.append(retry.delay_secs)
        now += retry.delay_secs
        (again,) = c.tick(now)
        assert again == StartRestore(rid + 1, 4, f"retry {rid} after a transient error: task 1: MemoryError: ")
    assert delays == [1, 2, 4, 8, 8, 8]


def test_a_permanent_error_drops_only_that_checkpoint_not_the_newer_ones() -> None:
    """Hole 3: one ok=False used to drop that checkpoint and every newer one."""
    c = running(completed=(3,))
    c.tick(10)
    for t in TASKS:
        c.on_task_saved(4, t, 1, 0, now=11)
    assert c.on_failure(12, "x") == [StartRestore(2, 3, "failure: x")]
    c.on_marked(4, 13)  # landed during the restore to 3
    (fall,) = c.on_task_restored(2, 1, False, 14, error="CorruptCheckpointError: bad")
    assert fall == StartRestore(3, 4, "task 1 could not restore checkpoint 3: CorruptCheckpointError: bad; "
                                      "falling back to checkpoint 4")
    assert c.completed == (4,)


def test_operator_restore_rolls_back_and_drops_newer_targets() -> None:
    c = running(completed=(3, 4))
    assert c.operator_restore(1, 3) == [StartRestore(2, 3, "operator: heron-py restore (checkpoint 3)")]
    assert c.completed == (3,)
    fresh = CheckpointCoordinator(CoordinatorConfig(interval_secs=5), TASKS)
    assert fresh.operator_restore(0, None) == [
        Ignored("operator restore before every task is ready: the first restore has not begun")]


def test_a_failed_marker_does_not_count_the_checkpoint_complete() -> None:
    """Hole 3: an ENOSPC on the marker used to be only logged while the id counted as complete."""
    c = running(completed=(3,))
    (start,) = c.tick(10)
    assert isinstance(start, StartCheckpoint)
    cid = start.checkpoint_id
    for t in TASKS:
        c.on_task_saved(cid, t, 1, 0, now=11)
    assert c.on_marked(cid, 12, "OSError: [Errno 28] No space left on device") == [CheckpointAborted(
        cid, "every task saved, but its complete marker could not be written: OSError: [Errno 28] No space left "
             "on device")]
    assert (c.state, c.completed, c.status().consecutive_failures) == (CoordinatorState.IDLE, (3,), 1)
    assert c.on_failure(13, "x")[-1] == StartRestore(2, 3, "failure: x")


def test_a_marker_that_lands_after_a_restore_began_is_still_a_target() -> None:
    c = running(completed=(3,))
    c.tick(10)
    for t in TASKS:
        c.on_task_saved(4, t, 1, 0, now=11)
    assert c.on_failure(12, "x") == [StartRestore(2, 3, "failure: x")]  # 4 is not durable yet
    assert c.on_marked(4, 13) == [CheckpointCommitted(4, (3, 4))]
    assert c.state is CoordinatorState.RESTORING and c.completed == (3, 4)


def test_a_marker_write_that_hangs_times_out_and_counts_as_a_failure() -> None:
    c = running(completed=(3,), timeout_secs=5)
    c.tick(10)
    for t in TASKS:
        c.on_task_saved(4, t, 1, 0, now=11)
    assert c.tick(15.9) == []
    assert c.tick(16) == [CheckpointAborted(4, "its complete marker was not durable after 5s")]
    assert c.status().consecutive_failures == 1
    assert c.tick(20) == [StartCheckpoint(5)]
    assert c.on_marked(4, 30) == [CheckpointCommitted(4, (3, 4))]  # it landed after all: durable, a target
    assert c.state is CoordinatorState.CHECKPOINTING


def test_a_task_that_cannot_save_aborts_the_checkpoint_at_once() -> None:
    """Issue 37 (found by the fault checker): a full checkpoint folder made every task's save
    fail silently and the master waited out the 60 s timeout; now the failed save aborts it."""
    c = running()
    assert c.tick(10) == [StartCheckpoint(1)]
    assert c.on_task_saved(1, 1, 10, 0.5, now=11) == []
    out = c.on_task_save_failed(1, 2, "OSError: [Errno 28] No space left on device")
    assert isinstance(out[0], CheckpointAborted) and out[0].checkpoint_id == 1
    assert "task 2 could not save its state: OSError: [Errno 28] No space left on device" in out[0].reason
    assert c.state is CoordinatorState.IDLE
    assert isinstance(c.on_task_save_failed(1, 3, "late")[0], Ignored)  # once aborted, nothing more
    assert c.tick(20) == [StartCheckpoint(2)]  # the next interval's checkpoint, well before a timeout


def test_next_deadline_is_when_tick_next_acts_in_each_state() -> None:
    """What a driver on a jumping clock (the test harness) ticks at: each state's own deadline,
    and ticking just before it does nothing while ticking at it acts."""
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=10, timeout_secs=4, restore_timeout_secs=30), TASKS,
                              completed=[4])
    assert c.next_deadline() is None  # starting: only the start moves it
    (restore,) = c.start(1)
    assert isinstance(restore, StartRestore)
    assert c.next_deadline() == 31  # restoring: its timeout
    stale = "TransientCheckpointError: checkpoint 4 of topology 'wc': task 2's state: ESTALE Stale file handle"
    c.on_task_restored(restore.restore_id, 1, True, 2)
    (retry,) = c.on_task_restored(restore.restore_id, 2, False, 2, error=stale)
    assert isinstance(retry, RestoreRetry)
    assert c.next_deadline() == 2 + retry.delay_secs  # a retry scheduled: its time, not the timeout
    (again,) = c.tick(2 + retry.delay_secs)
    assert isinstance(again, StartRestore)
    for t in TASKS:
        c.on_task_restored(again.restore_id, t, True, 4)
    assert c.next_deadline() == 14  # idle: the next checkpoint is due an interval after processing began
    assert c.tick(13.9) == [] and c.tick(14) == [StartCheckpoint(5)]
    assert c.next_deadline() == 18  # checkpointing: its timeout
    for t in TASKS:
        c.on_task_saved(5, t, 1, 0.1, now=15)
    assert c.state is CoordinatorState.COMMITTING
    assert c.next_deadline() == 19  # committing: the marker's timeout, from the completion
    assert c.tick(18.9) == [] and c.state is CoordinatorState.COMMITTING
    c.tick(19)
    assert c.state is CoordinatorState.IDLE
    assert c.next_deadline() == 24  # the next one still due an interval after the last start
