"""The checkpoint coordinator's edges that mutation testing (mutmut, docs/effectively-once.md)
found no test for: every config bound and message, the restore timers after each kind of
restore (their start time must be set: a restore that never times out hangs a topology), the
status fields in each state, what gc must keep (the checkpoint the tasks loaded after a
fallback), and the actions of an operator's restore mid-checkpoint."""

from __future__ import annotations

import pytest

from heron_py.checkpoint.coordinator import (
    CheckpointAborted,
    CheckpointCommitted,
    CheckpointComplete,
    CheckpointCoordinator,
    CheckpointDiscarded,
    CheckpointsFailing,
    CoordinatorConfig,
    CoordinatorState,
    Ignored,
    RestoreRetry,
    StartCheckpoint,
    StartProcessing,
    StartRestore,
)

TASKS = {1: "spout", 2: "bolt"}


def running(completed: tuple[int, ...] = (), **cfg: object) -> CheckpointCoordinator:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=10, **cfg), TASKS, completed)  # type: ignore[arg-type]
    (restore,) = c.start(0)
    assert isinstance(restore, StartRestore)
    for t in TASKS:
        c.on_task_restored(restore.restore_id, t, True, 0)
    return c


def checkpoint(c: CheckpointCoordinator, now: float) -> int:
    (start,) = c.tick(now)
    assert isinstance(start, StartCheckpoint)
    return start.checkpoint_id


def save(c: CheckpointCoordinator, cid: int, now: float) -> list[object]:
    out: list[object] = []
    for t in TASKS:
        out += c.on_task_saved(cid, t, size_bytes=10 * t, duration_secs=0.5 * t, now=now)
    return out


# --- config ---
@pytest.mark.parametrize(("kw", "message"), [
    ({"timeout_secs": 0}, "checkpoint config: timeout_secs must be > 0 or None, found 0"),
    ({"keep_completed": 0}, "checkpoint config: keep_completed must be >= 1, found 0"),
    ({"max_consecutive_failures": 0}, "checkpoint config: max_consecutive_failures must be >= 1, found 0"),
    ({"restore_timeout_secs": 0}, "checkpoint config: restore_timeout_secs must be > 0, found 0"),
])
def test_a_bad_config_is_one_line(kw: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError) as e:
        CoordinatorConfig(interval_secs=1, **kw)  # type: ignore[arg-type]
    assert str(e.value) == message


def test_the_smallest_good_values_are_taken() -> None:
    cfg = CoordinatorConfig(interval_secs=1, timeout_secs=0.5, keep_completed=1, max_consecutive_failures=1)
    assert (cfg.effective_timeout_secs, cfg.keep_completed, cfg.max_consecutive_failures) == (0.5, 1, 1)


def test_from_config_takes_the_timeout_and_the_number_kept() -> None:
    cfg = CoordinatorConfig.from_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                                         "topology.stateful.checkpoint.timeout.seconds": 7,
                                         "heron_py.checkpoint.keep": 5})
    assert (cfg.timeout_secs, cfg.keep_completed) == (7, 5)


def test_a_topology_without_tasks_is_one_line() -> None:
    with pytest.raises(ValueError) as e:
        CheckpointCoordinator(CoordinatorConfig(interval_secs=1), {})
    assert str(e.value) == "checkpoint coordinator: a topology needs at least one task, found none"
    c = running()
    with pytest.raises(ValueError) as e:
        c.on_failure(1, "a new plan", tasks={})
    assert str(e.value) == "checkpoint coordinator: a topology needs at least one task, found none"


# --- restore timers: every restore has a start time ---
def test_a_clean_start_restore_times_out_and_restores_again() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=1, start_clean=True, restore_timeout_secs=5), TASKS,
                              completed=[3])
    assert c.start(0) == [StartRestore(1, None, "topology start (topology.stateful.start.clean)")]
    assert c.tick(4.9) == []
    (again,) = c.tick(5)
    assert isinstance(again, StartRestore) and again.checkpoint_id is None
    (third,) = c.tick(10)  # the new restore's own start time
    assert isinstance(third, StartRestore) and third.restore_id == 3
    for t in TASKS:
        c.on_task_restored(3, t, True, 11)
    cid = checkpoint(c, 12)
    save(c, cid, 12)
    c.on_marked(cid, 12)
    assert c.completed == (cid,)  # the clean start dropped the old ones, and takes new ones


def test_a_timed_out_restore_restores_the_same_checkpoint_and_times_out_again() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=1, restore_timeout_secs=5), TASKS, completed=[3])
    c.start(0)
    (again,) = c.tick(5)
    assert isinstance(again, StartRestore) and again.checkpoint_id == 3
    (third,) = c.tick(10)
    assert isinstance(third, StartRestore) and third.checkpoint_id == 3


def test_a_retry_after_a_transient_error_keeps_the_error_and_its_own_timer() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=1, restore_timeout_secs=5, retry_initial_secs=1),
                              TASKS, completed=[3])
    c.start(0)
    (retry,) = c.on_task_restored(1, 1, False, 0.5, "OSError: [Errno 5] Input/output error")
    assert isinstance(retry, RestoreRetry)
    assert c.status().restore_error == "task 1: OSError: [Errno 5] Input/output error"
    assert c.status().restore_attempt == 1
    (again,) = c.tick(1.5)
    assert isinstance(again, StartRestore) and again.checkpoint_id == 3
    assert c.status().restore_error == "task 1: OSError: [Errno 5] Input/output error"  # still shown
    assert c.tick(6.4) == []
    (timed_out,) = c.tick(6.5)  # the retry's own restore times out from its own start
    assert isinstance(timed_out, StartRestore)


def test_a_fallback_and_an_operator_restore_have_their_own_timers() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=1, restore_timeout_secs=5), TASKS, completed=[2, 3])
    c.start(0)
    (fallback,) = c.on_task_restored(1, 1, False, 1, "CorruptCheckpointError: bad")
    assert isinstance(fallback, StartRestore) and fallback.checkpoint_id == 2
    (t1,) = c.tick(6)
    assert isinstance(t1, StartRestore)
    for t in TASKS:
        c.on_task_restored(t1.restore_id, t, True, 7)
    out = c.operator_restore(8, 2)
    (op,) = [a for a in out if isinstance(a, StartRestore)]
    (t2,) = c.tick(13)
    assert isinstance(t2, StartRestore) and t2.restore_id == op.restore_id + 1


# --- save reports ---
def test_a_save_failure_for_another_checkpoint_leaves_the_one_under_way() -> None:
    c = running()
    cid = checkpoint(c, 10)
    assert c.on_task_save_failed(cid + 7, 1, "ENOSPC") == [
        Ignored(f"task 1 could not save checkpoint {cid + 7}: not under way")]
    assert c.state is CoordinatorState.CHECKPOINTING and c.status().in_progress_id == cid
    (done,) = save(c, cid, 11)
    assert isinstance(done, CheckpointComplete)
    assert [t.task_id for t in done.checkpoint.tasks] == [1, 2]


def test_a_marker_nobody_waits_for_is_ignored() -> None:
    c = running()
    assert c.on_marked(5, 1) == [Ignored("checkpoint 5 marked: not being committed")]


def test_a_restore_report_for_another_restore_or_task_is_ignored() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=1), TASKS, completed=[3])
    assert c.on_task_restored(1, 1, True, 0) == [
        Ignored("task 1 restored for restore 1: not under way (under way none)")]
    c.start(0)
    assert c.on_task_restored(1, 9, True, 0) == [Ignored("task 9 restored for restore 1: not a task of the plan")]


# --- failures ---
def test_failing_after_restore_loops_names_the_count_and_reasons() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=1, max_consecutive_failures=2), TASKS)
    c.start(0)  # a clean start: no checkpoint yet
    c.on_failure(1, "task 2 (pid 7) restarted")
    out = c.on_failure(2, "task 2 (pid 8) restarted")
    assert [a for a in out if isinstance(a, CheckpointsFailing)] == [CheckpointsFailing(2, (
        "checkpoint 0: restore interrupted: task 2 (pid 7) restarted",
        "checkpoint 0: restore interrupted: task 2 (pid 8) restarted"))]


def test_a_failure_with_a_new_plan_waits_for_the_new_tasks() -> None:
    c = running()
    (restore,) = c.on_failure(1, "the plan changed", tasks={1: "spout", 2: "bolt", 5: "bolt"})
    assert isinstance(restore, StartRestore)
    for t in (1, 2):
        assert c.on_task_restored(restore.restore_id, t, True, 2) == []
    assert c.on_task_restored(restore.restore_id, 5, True, 2) == [StartProcessing(restore.restore_id, None)]
    assert c.status().tasks == 3


# --- the operator ---
def test_an_operator_restore_mid_checkpoint_aborts_it_first() -> None:
    c = running((3,))
    cid = checkpoint(c, 10)
    out = c.operator_restore(11, 3)
    assert out[0] == CheckpointAborted(cid, "the operator restores checkpoint 3")
    assert isinstance(out[1], StartRestore) and out[1].checkpoint_id == 3
    assert c.status().in_progress_id is None


def test_the_operators_choice_of_the_committing_checkpoint_keeps_it() -> None:
    """The operator may choose the checkpoint being committed (the driver checks it is
    complete in the storage): its marker landing then makes it the target, not a discard."""
    c = running((3,))
    cid = checkpoint(c, 10)
    save(c, cid, 11)
    c.operator_restore(12, cid)
    out = c.on_marked(cid, 12)
    assert isinstance(out[0], CheckpointCommitted) and cid in c.completed


def test_a_committing_checkpoint_the_operator_rolls_back_past_is_discarded_with_the_reason() -> None:
    c = running((3,))
    cid = checkpoint(c, 10)
    save(c, cid, 11)
    c.operator_restore(12, 3)
    assert c.on_marked(cid, 12) == [CheckpointDiscarded(cid, "the operator restored checkpoint 3")]


# --- status and gc ---
def test_the_status_in_each_state() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=10), TASKS)
    s = c.status()
    assert (s.loaded_id, s.failure, s.restore_attempt, s.tasks, s.in_progress_id) == (None, None, 0, 2, None)
    c.start(0)
    for t in TASKS:
        c.on_task_restored(1, t, True, 0)
    cid = checkpoint(c, 10)
    c.on_task_saved(cid, 1, 10, 0.5, 10.5)
    assert (c.status().in_progress_id, c.status().in_progress_saved) == (cid, 1)
    c.on_task_saved(cid, 2, 20, 1.0, 11)
    s = c.status()  # committing: every task saved, the marker not durable yet
    assert (s.state, s.in_progress_id, s.in_progress_saved, s.last_completed_id) == (
        CoordinatorState.COMMITTING, cid, 2, None)
    c.on_marked(cid, 11)
    s = c.status()
    assert (s.in_progress_id, s.in_progress_saved, s.last_completed_id) == (None, 0, cid)
    assert (s.last_completed_at, s.last_duration_secs, s.last_size_bytes) == (11, 1, 30)


def test_a_checkpoint_known_only_from_the_storage_has_no_figures() -> None:
    s = running((3,)).status()
    assert s.last_completed_id == 3
    assert (s.last_completed_at, s.last_duration_secs, s.last_size_bytes, s.components) == (None, None, None, ())


def test_gc_never_removes_what_the_tasks_loaded_after_a_fallback() -> None:
    """The tasks run on an older checkpoint after a fallback: gc keeps it while they do (a
    restore now would need it), even once it is no longer among the kept ones."""
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=1, keep_completed=2), TASKS, completed=[2, 3])
    c.start(0)
    (fallback,) = c.on_task_restored(1, 1, False, 1, "CorruptCheckpointError: bad")
    assert isinstance(fallback, StartRestore) and fallback.checkpoint_id == 2
    for t in TASKS:
        c.on_task_restored(fallback.restore_id, t, True, 2)
    assert c.status().loaded_id == 2
    committed = []
    for now in (3, 5):
        cid = checkpoint(c, now)
        save(c, cid, now + 0.5)
        committed.append(c.on_marked(cid, now + 0.5)[0])
    c1, c2 = (x.checkpoint_id for x in committed if isinstance(x, CheckpointCommitted))
    assert c.completed == (c1, c2)
    assert committed[-1] == CheckpointCommitted(c2, (2, c1, c2))


def test_a_fallback_forgets_the_figures_of_the_checkpoint_it_dropped() -> None:
    c = running(())
    cid = checkpoint(c, 10)
    save(c, cid, 11)
    c.on_marked(cid, 11)
    c.on_failure(12, "task 1 (pid 5) restarted")
    (r,) = [a for a in c.on_task_restored(2, 1, False, 13, "CorruptCheckpointError: bad")]
    assert c.status().last_completed_id is None and c.status().last_duration_secs is None
    assert c.state is CoordinatorState.WAITING_FOR_OPERATOR, r


def test_after_the_operator_rolls_back_the_status_shows_no_figures_of_a_newer_checkpoint() -> None:
    c = running((3,))
    cid = checkpoint(c, 10)
    save(c, cid, 11)
    c.on_marked(cid, 11)
    assert c.status().last_duration_secs == 1.0  # known: completed by this master
    c.operator_restore(12, 3)
    s = c.status()
    assert s.last_completed_id == 3
    assert (s.last_completed_at, s.last_duration_secs, s.last_size_bytes, s.components) == (None, None, None, ())


def test_with_one_kept_gc_never_removes_the_checkpoint_a_restore_is_loading() -> None:
    """keep=1: a loss starts a restore of checkpoint A while B is committing; B's marker lands
    during the restore and pushes A out of the kept one, but the tasks are loading A: gc keeps it."""
    c = running(keep_completed=1)
    a = checkpoint(c, 10)
    save(c, a, 10.5)
    c.on_marked(a, 10.5)
    b = checkpoint(c, 20)
    save(c, b, 20.5)  # committing: every task saved, B's marker not durable yet
    (restore,) = [x for x in c.on_failure(21, "a stream manager lost in-flight data") if isinstance(x, StartRestore)]
    assert restore.checkpoint_id == a
    out = c.on_marked(b, 21.5)
    # B is a consistent snapshot (the kept one now), and A, being loaded, is protected from gc
    assert out == [CheckpointCommitted(b, (a, b))]


def test_a_completed_checkpoint_names_the_tasks_that_stored_state_and_its_packing() -> None:
    c = running()
    cid = checkpoint(c, 10)
    c.on_task_saved(cid, 1, 0, 0.1, 10.2, stored=False)  # a stateless spout saves nothing
    (complete,) = c.on_task_saved(cid, 2, 30, 0.2, 10.4, stored=True)
    assert isinstance(complete, CheckpointComplete)
    assert complete.checkpoint.stored == (2,)
    assert complete.checkpoint.packing == {"spout": (1,), "bolt": (2,)}
