"""What the master's log says of each checkpoint coordinator action an operator should hear of:
one place for the lines, so the topology master (topology_master/checkpoint_actions.py) and the
test harness's simulated master (heron_py/testing/master.py) log the same words."""

from __future__ import annotations

import logging

from heron_py.checkpoint.coordinator import (
    CheckpointAborted,
    CheckpointDiscarded,
    CheckpointsFailing,
    CheckpointsRecovered,
    CoordinatorAction,
    RestoreFailed,
    RestoreRetry,
    StartProcessing,
    StartRestore,
)


def log_line(a: CoordinatorAction) -> tuple[int, str] | None:
    """The level and line the master logs ``a`` with; None for an action it does not log (its
    commands and their results show in the page's state and metrics instead)."""
    if isinstance(a, StartRestore):
        what = "a clean start" if a.checkpoint_id is None else f"checkpoint {a.checkpoint_id}"
        return logging.INFO, f"restore {a.restore_id} to {what} ({a.reason})"
    if isinstance(a, StartProcessing):
        return logging.INFO, f"every task restored (restore {a.restore_id}): processing"
    if isinstance(a, CheckpointAborted):
        return logging.WARNING, f"checkpoint {a.checkpoint_id} aborted: {a.reason}"
    if isinstance(a, CheckpointDiscarded):
        return logging.WARNING, f"checkpoint {a.checkpoint_id} discarded: {a.reason}"
    if isinstance(a, CheckpointsFailing):
        return logging.ERROR, (f"effectively once: {a.consecutive} checkpoints failed in a row "
                               f"(topology.stateful.max.consecutive.failures); the state is not being saved: "
                               f"{'; '.join(a.reasons)}")
    if isinstance(a, CheckpointsRecovered):
        return logging.INFO, f"effectively once: checkpoint {a.checkpoint_id} completed after a run of failures"
    if isinstance(a, RestoreRetry):
        return logging.WARNING, (f"restore {a.restore_id} of checkpoint {a.checkpoint_id}: transient error "
                                 f"({a.reason}); retry {a.attempt} in {a.delay_secs:g}s")
    if isinstance(a, RestoreFailed):
        return logging.ERROR, f"effectively once: no checkpoint could be restored, waiting for the operator: {a.reason}"
    return None
