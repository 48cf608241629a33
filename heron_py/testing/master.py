"""``SimulatedMaster``: the topology master's side of effectively once, for a topology run in one
process by the ``Harness``.

The rules are the master's own: ``heron_py.checkpoint.coordinator.CheckpointCoordinator`` decides
when a checkpoint starts, completes, times out or is aborted, counts failures in a row
(``CheckpointFailureManager``), and picks what a restore loads (retrying a transient error,
falling back from a corrupt checkpoint). This module is its driver without I/O threads: it
feeds the coordinator the tasks' reports and the harness's clock, and carries its actions out on
the tasks (``Cluster``) and an in-memory storage, at once and in order.

Two things the real driver has no need for:

- the harness's clock jumps from event to event, so the master says when the coordinator next
  needs a ``tick`` (``next_wake``: the coordinator's own ``next_deadline``); a real driver ticks
  every second instead;
- a test may ask for a checkpoint now (``checkpoint_now``), which no operator can.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from google.protobuf.message import Message

from heron_py.checkpoint.action_log import log_line
from heron_py.checkpoint.coordinator import (
    CheckpointCommitted,
    CheckpointComplete,
    CheckpointCoordinator,
    CoordinatorAction,
    CoordinatorState,
    Ignored,
    RestoreFailed,
    StartCheckpoint,
    StartProcessing,
    StartRestore,
)
from heron_py.checkpoint.storage import CheckpointStorage
from proto import heron_py_pb2 as pb

LOG = logging.getLogger("heron_py.testing.master")


class Cluster(Protocol):
    """The master's commands, as the stream managers relay them to every task."""

    def start_checkpoint(self, checkpoint_id: int) -> None: ...

    def restore(self, restore_id: int, checkpoint_id: int) -> None:
        """Every task drops in-flight data and loads ``checkpoint_id`` (0: a clean start)."""

    def start_processing(self, restore_id: int) -> None: ...

    def committed(self, checkpoint_id: int) -> None: ...


class Record(Protocol):
    """Where the master writes what a test reads (``HarnessResult`` is one)."""

    checkpoints: list[int]  # completed, oldest first
    restores: list[int]  # what each rollback after the start loaded (0: clean)


class SimulatedMaster:
    """Drives a ``CheckpointCoordinator`` over the tasks of one process, on an injected clock."""

    def __init__(self, coordinator: CheckpointCoordinator, storage: CheckpointStorage, topology: str,
                 cluster: Cluster, record: Record, clock: Callable[[], float]) -> None:
        self.coordinator = coordinator
        self._storage = storage
        self._topology = topology
        self._cluster = cluster
        self._record = record
        self._clock = clock
        # the coordinator's time is the clock plus this: checkpoint_now moves it forward
        self._skew = 0.0
        self._started = False  # the first restore is the topology's start, not a rollback
        self._saved: dict[int, list[int]] = {}  # checkpoint id -> tasks that reported it, for errors

    def now(self) -> float:
        return self._clock() + self._skew

    # --- events ---
    def start(self) -> None:
        """The topology starts: every task restores (a clean start), then processes."""
        self._apply(self.coordinator.start(self.now()))

    def tick(self) -> None:
        self._apply(self.coordinator.tick(self.now()))

    def on_failure(self, reason: str) -> None:
        """A task died: every task rolls back to the newest complete checkpoint."""
        self._apply(self.coordinator.on_failure(self.now(), reason))

    def on_message(self, msg: Message) -> None:
        """A task's report, as the master takes it from its stream manager."""
        c = self.coordinator
        match msg:
            case pb.StateRestored():
                self._apply(c.on_task_restored(msg.restore_id, msg.task_id, msg.ok, self.now(), msg.error))
            case pb.CheckpointSaved(failed=True):
                self._apply(c.on_task_save_failed(msg.checkpoint_id, msg.task_id, msg.error))
            case pb.CheckpointSaved():
                self._saved.setdefault(msg.checkpoint_id, []).append(msg.task_id)
                self._apply(c.on_task_saved(msg.checkpoint_id, msg.task_id, msg.size_bytes, msg.duration_secs,
                                            self.now(), stored=msg.stored))
            case _:
                raise AssertionError(f"the harness has no handler for a task's {type(msg).__name__}")

    def checkpoint_now(self) -> int:
        """Starts a checkpoint at once; returns its id. The coordinator starts one only when one
        is due, so its time jumps to the due time: its rules read only differences of times, and
        while it is idle nothing but that due time waits on its clock, so the jump moves nothing else."""
        state, due = self.coordinator.state, self.coordinator.next_deadline()
        if state is not CoordinatorState.IDLE or due is None:
            raise AssertionError(f"checkpoint: expected the master idle (every task processing, no checkpoint "
                                 f"under way), found it {state.value}")
        self._skew += max(0.0, due - self.now())
        self.tick()
        return self.coordinator.issued_up_to

    def saved(self, checkpoint_id: int) -> list[int]:
        """The tasks that reported saving ``checkpoint_id``, sorted."""
        return sorted(self._saved.get(checkpoint_id, ()))

    def next_wake(self) -> float | None:
        """When, on the clock, the coordinator next acts on its own (None: only on an event)."""
        at = self.coordinator.next_deadline()
        return None if at is None else at - self._skew

    # --- actions ---
    def _apply(self, actions: Iterable[CoordinatorAction]) -> None:
        config = self.coordinator.config
        for a in actions:
            if isinstance(a, RestoreFailed):
                # the real master waits for the operator: a test cannot go on from there
                raise AssertionError(f"effectively once: no checkpoint could be restored: {a.reason}")
            line = log_line(a)  # the master's own words (heron_py.checkpoint.action_log)
            if line is not None:
                LOG.log(line[0], "%s", line[1])
            if isinstance(a, StartCheckpoint):
                self._cluster.start_checkpoint(a.checkpoint_id)
            elif isinstance(a, CheckpointComplete):
                self._mark(a)
            elif isinstance(a, CheckpointCommitted):
                self._saved.pop(a.checkpoint_id, None)
                self._record.checkpoints.append(a.checkpoint_id)
                self._cluster.committed(a.checkpoint_id)
                self._storage.gc(self._topology, config.keep_completed, a.protect)
            elif isinstance(a, StartRestore):
                self._saved.clear()
                self._cluster.restore(a.restore_id, a.checkpoint_id or 0)
            elif isinstance(a, StartProcessing):
                if self._started:
                    self._record.restores.append(a.checkpoint_id or 0)
                self._started = True
                self._cluster.start_processing(a.restore_id)
            elif isinstance(a, Ignored):
                LOG.debug("checkpoint coordinator: %s", a.reason)

    def _mark(self, done: CheckpointComplete) -> None:
        cp = done.checkpoint
        try:
            self._storage.mark_complete(self._topology, cp.checkpoint_id, cp.stored, cp.packing)
        except Exception as e:  # the coordinator judges a storage error, as the driver reports its I/O's
            self._apply(self.coordinator.on_marked(cp.checkpoint_id, self.now(), f"{type(e).__name__}: {e}"))
            return
        self._apply(self.coordinator.on_marked(cp.checkpoint_id, self.now()))
