"""The checkpoint failure manager (heron_py/checkpoint/failures.py), and which restore errors are
transient (issue 37, hole 5)."""

from __future__ import annotations

import errno
import os

import pytest

from heron_py.checkpoint.coordinator import (
    CheckpointAborted,
    CheckpointCommitted,
    CheckpointCoordinator,
    CheckpointsFailing,
    CheckpointsRecovered,
    CoordinatorConfig,
    StartCheckpoint,
)
from heron_py.checkpoint.failures import CheckpointFailureManager, backoff_secs, is_transient_load_error

TASKS = {1: "spout", 2: "bolt"}


def test_the_manager_trips_once_at_the_limit_and_recovers_on_a_success() -> None:
    m = CheckpointFailureManager(3)
    assert [m.failed(i, f"r{i}").tripped for i in (1, 2, 3, 4)] == [False, False, True, False]
    assert (m.failing, m.consecutive, m.total) == (True, 4, 4)
    assert m.reasons == ("checkpoint 1: r1", "checkpoint 2: r2", "checkpoint 3: r3", "checkpoint 4: r4")
    assert m.succeeded().recovered
    after: tuple[bool, int, tuple[str, ...]] = (m.failing, m.consecutive, m.reasons)
    assert after == (False, 0, ())
    assert not m.succeeded().recovered
    with pytest.raises(ValueError) as e:
        CheckpointFailureManager(0)
    assert str(e.value) == "checkpoint failure manager: max_consecutive must be an int >= 1, found 0"


def test_the_coordinator_says_so_after_max_consecutive_failures() -> None:
    c = CheckpointCoordinator(CoordinatorConfig(interval_secs=10, timeout_secs=5, max_consecutive_failures=2), TASKS)
    c.start(0)
    for t in TASKS:
        c.on_task_restored(1, t, True, 0)
    assert c.tick(10) == [StartCheckpoint(1)]
    assert c.tick(15) == [CheckpointAborted(1, "timed out after 5s waiting for tasks [1, 2]")]
    assert not c.status().failing
    c.tick(20)
    c.on_task_saved(2, 1, 1, 0, now=21)
    tripped = c.on_failure(22, "task 2 died")
    assert tripped[:2] == [CheckpointAborted(2, "failure: task 2 died"), CheckpointsFailing(2, (
        "checkpoint 1: timed out after 5s waiting for tasks [1, 2]", "checkpoint 2: failure: task 2 died"))]
    s = c.status()
    assert (s.failing, s.consecutive_failures) == (True, 2)
    for t in TASKS:
        c.on_task_restored(2, t, True, 23)
    (start,) = c.tick(33)
    assert isinstance(start, StartCheckpoint)
    for t in TASKS:
        c.on_task_saved(start.checkpoint_id, t, 1, 0, now=34)
    assert c.on_marked(start.checkpoint_id, 35) == [CheckpointCommitted(3, (3,)), CheckpointsRecovered(3)]
    assert (c.status().failing, c.status().consecutive_failures, c.status().failure_reasons) == (False, 0, ())


@pytest.mark.parametrize(("error", "transient"), [
    ("TransientCheckpointError: checkpoint 4: ESTALE", True),
    ("MemoryError: ", True),
    (f"OSError: [Errno {errno.ESTALE}] {os.strerror(errno.ESTALE)}: '/x'", True),
    (f"OSError: [Errno {errno.EIO}] {os.strerror(errno.EIO)}", True),
    (f"OSError: [Errno {errno.EMFILE}] {os.strerror(errno.EMFILE)}", True),
    (f"OSError: [Errno {errno.EACCES}] {os.strerror(errno.EACCES)}", False),
    ("CorruptCheckpointError: checksum mismatch", False),
    ("IncompleteCheckpointError: not complete", False),
    ("UnpicklingError: invalid load key", False),
    ("", False),
])
def test_which_restore_errors_are_transient(error: str, transient: bool) -> None:
    assert is_transient_load_error(error) is transient


def test_backoff() -> None:
    assert [backoff_secs(a, 1, 30) for a in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    with pytest.raises(ValueError, match="backoff: attempt must be >= 1, found 0"):
        backoff_secs(0, 1, 30)
