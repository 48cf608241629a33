"""The active master's driver of effectively once: it feeds the coordinator
(heron_py/checkpoint/coordinator.py, the rules) with time, the tasks' reports and failures and
the operator's command, and hands what the coordinator decides to be carried out.

The parts, one job each, as Flink's checkpoint coordinator stands beside its checkpoint storage
and its completed-checkpoint store:
- ``CheckpointDriver`` (here): deciding what an input means and when; the clocks are injected.
- ``ActingGate`` (here): whether this master may act, and what waits until it may.
- ``ActionRunner`` (checkpoint_actions.py): the commands to every stream manager, the log lines.
- ``CompletedCheckpoints`` (checkpoint_store.py): the complete ids and the durable record.
- ``StorageWorker`` (checkpoint_io.py): the blocking storage calls, in order on one I/O thread,
  their results back on the event loop; an id is complete only once its marker is durable
  (``on_marked``).

Failures are seen in what the stream managers report of their instances: a task that was
ready and is now gone, or is back with another pid, or a stream manager that disconnected.
The first restore happens once every task is ready (a master that took over restores too: it
cannot know what the tasks did while no master watched).

Ids come from the master's election epoch (``masterepochs/NAME`` in the state manager, one more
for every master that becomes active; docs/ARCHITECTURE.md section 7): restore ids go on the wire
as ``epoch << 32 | n`` and checkpoint ids start at ``epoch << 32 | 1``, so a master that took over
sends ids above every id an earlier master sent, whatever the clocks say, and never reuses a
checkpoint id an earlier master's tasks may still be saving into. A master that lost its
state-manager session (``session_ok``) or whose epoch is no longer the newest (``epoch_now``)
neither starts nor completes a checkpoint: the check runs on the I/O thread right before the
marker is written.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from pathlib import Path
from typing import Any

from heron_py.checkpoint.coordinator import (
    CheckpointCommitted,
    CheckpointComplete,
    CheckpointCoordinator,
    CoordinatorConfig,
    CoordinatorState,
)
from heron_py.checkpoint.select import checkpoint_location, open_checkpoint_storage
from heron_py.checkpoint.storage import CheckpointStorage
from heron_py.common.config import StatefulConfig, effectively_once
from heron_py.common.net import Connection
from heron_py.planner.model import PackingPlan, TopologyDef
from proto import heron_py_pb2 as pb
from topology_master.checkpoint_actions import ActionRunner
from topology_master.checkpoint_io import CheckpointRecords, StorageWorker, Superseded
from topology_master.checkpoint_store import CompletedCheckpoints

EPOCH_BITS = 32
SEQ_MASK = (1 << EPOCH_BITS) - 1


def restore_wire_id(epoch: int, n: int) -> int:
    """The restore id on the wire: above every id of a master with a lower epoch."""
    if not 0 < n <= SEQ_MASK:
        raise ValueError(f"restore id: the sequence number must be in 1..{SEQ_MASK}, found {n}")
    return (epoch << EPOCH_BITS) | n


def first_checkpoint_id(epoch: int, stored_ids: Iterable[int]) -> int:
    """Above every id in the storage and every id a master with a lower epoch could use, even
    one whose saves land after this master listed the storage."""
    return max([(epoch << EPOCH_BITS) | 1, *(c + 1 for c in stored_ids)])


class Acting(Enum):
    """Whether this master may drive checkpoints."""
    ACTING = "acting"
    SESSION_LOST = "session lost"  # it cannot know it is still the active master; it may act again
    SUPERSEDED = "superseded"  # a newer master took over: for good


class ActingGate:
    """Whether this master may act, and what came while it could not (its state-manager
    session suspended): a task gone or restarted, a stream manager's rollback request (newest
    per container, with the answer's way back). The driver acts on those first thing once it may
    act again: a restarted task would wait for a restore forever, and a stream manager asks until
    it is answered."""

    def __init__(self, session_ok: Callable[[], bool], log: logging.Logger) -> None:
        self._session_ok = session_ok
        self._log = log
        self.superseded: str | None = None
        self._failures: list[str] = []
        self._rollbacks: dict[int, tuple[int, str, Callable[[bytes], None]]] = {}

    @property
    def state(self) -> Acting:
        if self.superseded is not None:
            return Acting.SUPERSEDED
        return Acting.ACTING if self._session_ok() else Acting.SESSION_LOST

    def may_act(self) -> bool:
        return self.state is Acting.ACTING

    def why_not(self) -> str:
        return self.superseded or "its state-manager session is lost"

    def stop(self, why: str) -> None:
        if self.superseded is None:
            self.superseded = why
            self._log.error("effectively once: this master stops driving checkpoints: %s", why)

    def defer_failure(self, reason: str) -> None:
        self._failures.append(reason)

    def defer_rollback(self, container: int, restore_id: int, reason: str, answer: Callable[[bytes], None]) -> None:
        self._rollbacks[container] = (restore_id, reason, answer)

    def take_deferred(self) -> tuple[list[str], list[tuple[int, tuple[int, str, Callable[[bytes], None]]]]]:
        """What waited, emptied: the failures in order, the rollback requests by container."""
        failures, self._failures = self._failures, []
        rollbacks, self._rollbacks = self._rollbacks, {}
        return failures, sorted(rollbacks.items())


class CheckpointDriver:
    """The master's side of effectively once: it feeds the coordinator, tells the
    ``ActionRunner`` to carry out what the coordinator decided, and keeps the master from acting
    when it may not (``ActingGate``)."""

    def __init__(self, topology: str, tasks: Mapping[int, str], config: CoordinatorConfig, storage: CheckpointStorage,
                 *, epoch: int, send_all: Callable[[bytes], None], log: logging.Logger,
                 io: concurrent.futures.Executor | None = None, session_ok: Callable[[], bool] = lambda: True,
                 epoch_now: Callable[[], int] | None = None, clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 state_changed: Callable[[], None] = lambda: None, records: CheckpointRecords | None = None) -> None:
        """``epoch``: this master's election epoch. ``io``: where storage calls run (default: a
        thread of our own). ``session_ok``: False once the state-manager session is lost.
        ``epoch_now``: the newest epoch in the state manager (read on the I/O thread).
        ``state_changed``: called when what the page shows changed
        (waiting for the operator, failing, recovered, processing again): the master writes its
        execution state. ``records``: the durable record of completed checkpoints and the
        operator's choice (None: none is kept, as in tests of the storage alone)."""
        if epoch < 0:
            raise ValueError(f"checkpoint driver: epoch must be >= 0, found {epoch}")
        self.topology = topology
        self.epoch = epoch
        self.config = config
        self._tasks = dict(tasks)
        self._log = log
        self._clock = clock
        self._wall = wall
        self._gate = ActingGate(session_ok, log)
        self._store = CompletedCheckpoints(
            StorageWorker(topology, storage, records, log, epoch=epoch, io=io, session_ok=session_ok,
                          epoch_now=epoch_now),
            keep_completed=config.keep_completed, log=log)
        self._rid_base = epoch << EPOCH_BITS
        self._actions = ActionRunner(self._store, rid_base=self._rid_base, send_all=send_all, log=log,
                                     state_changed=state_changed, marked=self._marked)
        self.coordinator: CheckpointCoordinator | None = None  # once the storage was listed
        self._pids: dict[int, int] = {}  # task -> pid while ready, as last seen
        self.last_completed_wall: float | None = None

    # --- life ---
    async def run(self, stopped: asyncio.Event, period_s: float = 0.2) -> None:
        """Lists the storage (on the I/O thread, retried), then ticks the coordinator until ``stopped``."""
        try:
            opened = await self._store.opened()
            if opened is not None and not stopped.is_set():
                completed, ids, recorded = opened
                first = first_checkpoint_id(self.epoch, ids)
                self.coordinator = CheckpointCoordinator(self.config, self._tasks, completed=completed,
                                                         first_id=first, recorded=recorded)
                self._log.info("effectively once: master epoch %d, complete checkpoints %s (recorded: %s), "
                               "first id %d", self.epoch, completed[-self.config.keep_completed:],
                               recorded or "none", first)
                self._maybe_start()
            while not stopped.is_set():
                self.tick()
                try:
                    await asyncio.wait_for(stopped.wait(), period_s)
                except TimeoutError:
                    pass
        finally:
            self.close()

    def close(self) -> None:
        self._store.close()

    @property
    def storage_error(self) -> str | None:
        return self._store.storage_error

    @property
    def superseded(self) -> str | None:
        """Why this master stopped driving checkpoints for good (None while it may)."""
        return self._gate.superseded

    # --- inputs ---
    def tick(self) -> None:
        c = self.coordinator
        if c is None or not self._gate.may_act():
            return
        # what waited for the session first: a checkpoint must not complete past a loss
        failures, rollbacks = self._gate.take_deferred()
        if failures and c.state not in (CoordinatorState.STARTING, CoordinatorState.WAITING_FOR_OPERATOR):
            reason = "; ".join(failures)
            self._log.warning("effectively once: while this master could not act: %s; rolling every task back",
                              reason)
            self._actions.apply(c.on_failure(self._clock(), reason, self._tasks))
        for container, (restore_id, why, answer) in rollbacks:
            self.on_rollback_request(container, restore_id, why, answer)
        self._maybe_start()
        self._actions.apply(c.tick(self._clock()))

    def on_instances(self, instances: Mapping[int, Mapping[str, Any]], cause: str = "") -> None:
        """The master's view of every task (component, container, pid, ready) changed."""
        gone = []
        for task, info in instances.items():
            pid = int(info.get("pid", 0)) if info.get("ready") else 0
            old = self._pids.get(task)
            # only the plan's tasks fail: not one a rescale removed (it exits) or added but not switched to yet
            if old is not None and old != pid and task in self._tasks:
                gone.append(f"task {task} (pid {old}) " + ("restarted" if pid else "is gone"))
            if pid:
                self._pids[task] = pid
            else:
                self._pids.pop(task, None)
        c = self.coordinator
        if c is None:
            return  # the first restore, once listed, replaces whatever the tasks did
        if not self._gate.may_act():
            if gone:  # a restarted task would wait for a restore forever
                self._gate.defer_failure((cause + ": " if cause else "") + ", ".join(gone))
            return
        if c.state is CoordinatorState.STARTING:
            self._maybe_start()
        elif gone and c.state is not CoordinatorState.WAITING_FOR_OPERATOR:
            reason = (cause + ": " if cause else "") + ", ".join(gone)
            self._log.warning("effectively once: %s; rolling every task back", reason)
            self._actions.apply(c.on_failure(self._clock(), reason))

    def on_rollback_request(self, container: int, restore_id: int, reason: str,
                            answer: Callable[[bytes], None] = lambda frame: None) -> None:
        """A stream manager lost in-flight data of the run that ``restore_id`` started: every
        task rolls back. A request about an older run, or while a restore is under way (no task
        processes before it ends) or the operator decides, is moot. Either way the stream
        manager is answered (it asks again until it is). One that comes while this master may
        not act waits until it may."""
        c = self.coordinator
        if c is None or not self._gate.may_act():
            self._log.warning("effectively once: stream manager %d asked to roll back restore %d (%s) while this "
                              "master cannot act (%s); kept until it can", container, restore_id, reason,
                              "storage not listed yet" if c is None else self._gate.why_not())
            self._gate.defer_rollback(container, restore_id, reason, answer)
            return
        current = self._rid_base + c.restore_seq if c.restore_seq else 0
        if restore_id != current or c.state in (CoordinatorState.STARTING, CoordinatorState.RESTORING,
                                                 CoordinatorState.WAITING_FOR_OPERATOR):
            why = f"restore {current}, {c.state.value}"
            self._log.info("effectively once: stream manager %d asked to roll back restore %d (%s): moot (%s)",
                           container, restore_id, reason, why)
            answer(ActionRunner.answer(restore_id, acted=False, reason=why))
            return
        why = f"stream manager {container}: {reason}"
        self._log.warning("effectively once: %s; rolling every task back", why)
        self._actions.apply(c.on_failure(self._clock(), why, data_lost=True))
        answer(ActionRunner.answer(restore_id, acted=True, reason=why))

    def rescale_blocker(self) -> str | None:
        """Why an effectively-once live rescale cannot start now (None: it can): it ends in a
        restore, which this master must be able to order."""
        c = self.coordinator
        if c is None:
            return f"the checkpoint storage is not listed yet ({self.storage_error or 'in progress'}); try again"
        if not self._gate.may_act():
            return f"this master may not restore ({self._gate.why_not()})"
        if c.state is CoordinatorState.WAITING_FOR_OPERATOR:
            return ("effectively once waits for the operator (heron-py restore NAME --checkpoint ID | --clean) "
                    "before anything restores")
        return None

    def replan(self, tasks: Mapping[int, str], reason: str) -> None:
        """A live rescale switched the plan (its stream managers and instances have it): the
        new plan's tasks are the ones counted, and every one restores the newest complete
        checkpoint under it (coordinator.replan). A removed task's exit is then no failure. A
        master that may not act now keeps it as a failure to act on (its restore follows the
        new tasks too)."""
        self._tasks = dict(tasks)
        self._pids = {t: p for t, p in self._pids.items() if t in self._tasks}
        c = self.coordinator
        if c is None:
            return  # the first restore, once the storage is listed, is onto these tasks
        if not self._gate.may_act():
            if c.state is CoordinatorState.STARTING:
                c.replan(self._clock(), tasks, reason)  # starting, it only takes the tasks: nothing to send
            else:  # the restore once it may act, onto the driver's tasks (tick)
                self._gate.defer_failure(f"rescale: {reason}")
            return
        self._log.info("effectively once: rescale (%s): every task restores under the new plan", reason)
        self._actions.apply(c.replan(self._clock(), tasks, reason))

    def greet(self, conn: Connection) -> None:
        """A stream manager registered: it gets the restore or the checkpoint start under way."""
        if self.coordinator is not None:
            self._actions.greet(conn, self.coordinator)

    def on_report(self, msg: pb.CheckpointSaved | pb.StateRestored) -> None:
        """An instance saved its state (or failed to), or restored, through its stream manager."""
        c = self.coordinator
        if c is None or not self._gate.may_act():
            return
        if isinstance(msg, pb.StateRestored):
            n = msg.restore_id - self._rid_base
            if 0 < n <= SEQ_MASK:  # else another master's restore (an older epoch): not ours to count
                self._actions.apply(c.on_task_restored(n, msg.task_id, msg.ok, self._clock(), msg.error))
        elif msg.failed:
            self._actions.apply(c.on_task_save_failed(msg.checkpoint_id, msg.task_id, msg.error))
        else:
            self._actions.apply(c.on_task_saved(msg.checkpoint_id, msg.task_id, msg.size_bytes, msg.duration_secs,
                                                self._clock(), stored=msg.stored))

    def operator_restore(self, checkpoint_id: int | None) -> tuple[bool, str]:
        """``heron-py restore NAME --checkpoint ID | --clean``: checked against the ids known to
        be complete (no I/O here: the event loop's thread)."""
        c = self.coordinator
        if c is None:
            return False, (f"topology {self.topology!r}: the checkpoint storage is not listed yet "
                           f"({self.storage_error or 'in progress'}); try again")
        if not self._gate.may_act():
            return False, f"topology {self.topology!r}: this master may not restore ({self._gate.why_not()})"
        if checkpoint_id is not None:
            known = self._store.complete | set(c.completed)
            if checkpoint_id not in known:
                return False, (f"topology {self.topology!r}: checkpoint {checkpoint_id} is not complete in the "
                               f"storage; expected one of {sorted(known) or 'none'} or --clean")
        before = c.state
        actions = c.operator_restore(self._clock(), checkpoint_id)
        if c.state is before and c.state is not CoordinatorState.RESTORING:
            self._actions.apply(actions)
            return False, "; ".join(getattr(a, "reason", "") for a in actions)
        # durable before the restore's commands go: a master taking over keeps the choice
        self._store.operator_chose(checkpoint_id, c.issued_up_to)
        self._actions.apply(actions)
        what = "a clean start (every task's state is dropped)" if checkpoint_id is None else \
            f"checkpoint {checkpoint_id}"
        return True, f"topology {self.topology!r}: restoring {what}"

    # event loop, with the marker's outcome
    def _marked(self, done: CheckpointComplete, error: BaseException | None) -> None:
        c = self.coordinator
        assert c is not None
        cp = done.checkpoint
        if isinstance(error, Superseded):
            self._gate.stop(str(error))
        if error is not None:
            self._log.error("checkpoint %d: every task saved, but marking it complete failed: %s", cp.checkpoint_id,
                            error)
            self._actions.apply(c.on_marked(cp.checkpoint_id, self._clock(), f"{type(error).__name__}: {error}"))
            return
        self._log.info("checkpoint %d complete: %d tasks, %d bytes, %.1f ms", cp.checkpoint_id, len(cp.tasks),
                       cp.size_bytes, cp.duration_secs * 1000)
        actions = c.on_marked(cp.checkpoint_id, self._clock())
        if any(isinstance(a, CheckpointCommitted) for a in actions):
            # only a checkpoint that counts shows its time: a discarded one (a loss or the
            # operator's choice while it was committing) must not lend it to the one before
            self.last_completed_wall = self._wall()
        self._actions.apply(actions)

    def _maybe_start(self) -> None:
        c = self.coordinator
        if c is not None and c.state is CoordinatorState.STARTING and self._tasks.keys() <= self._pids.keys() \
                and self._gate.may_act():
            self._log.info("every task is ready: restoring before processing")
            self._actions.apply(c.start(self._clock()))

# --- what a driver shows: for status, the HTTP API, metrics and the page (not part of driving) ---
def driver_metrics(driver: CheckpointDriver) -> dict[str, int]:
    """The master's own checkpoint metrics (for its metrics report)."""
    s = driver.coordinator.status() if driver.coordinator is not None else None
    return {"__checkpoint-failing": int(bool(s and s.failing)),
            "__checkpoint-consecutive-failures": s.consecutive_failures if s else 0,
            "__checkpoint-waiting-for-operator": int(bool(s and s.state is CoordinatorState.WAITING_FOR_OPERATOR))}


def driver_status(driver: CheckpointDriver) -> dict[str, Any]:
    """For status, the HTTP API, metrics and the execution state the page reads."""
    if driver.coordinator is None:
        return {"state": CoordinatorState.STARTING.value, "epoch": driver.epoch,
                "storage_error": driver.storage_error, "failing": False, "consecutive_failures": 0}
    s = driver.coordinator.status()
    return {
        "state": s.state.value, "epoch": driver.epoch, "in_progress_id": s.in_progress_id,
        "in_progress_saved": s.in_progress_saved,
        "tasks": s.tasks, "last_completed_id": s.last_completed_id,
        "last_completed_time": driver.last_completed_wall if s.last_completed_at is not None else None,
        "last_duration_secs": s.last_duration_secs, "last_size_bytes": s.last_size_bytes,
        "components": {c.component: {"tasks": c.tasks, "size_bytes": c.size_bytes,
                                     "max_duration_secs": c.max_duration_secs} for c in s.components},
        "restore_checkpoint_id": s.restore_checkpoint_id, "failure": s.failure,
        "waiting_for_operator": s.state is CoordinatorState.WAITING_FOR_OPERATOR,
        "failing": s.failing, "consecutive_failures": s.consecutive_failures,
        "failure_reasons": list(s.failure_reasons), "restore_attempt": s.restore_attempt,
        "restore_error": s.restore_error, "loaded_checkpoint_id": s.loaded_id,
        "completed_ids": list(driver.coordinator.completed), "superseded": driver.superseded,
    }


def driver_for(topology: str, topo: TopologyDef, packing: PackingPlan, home: Path, *,
               send_all: Callable[[bytes], None], log: logging.Logger, epoch: int,
               session_ok: Callable[[], bool] = lambda: True,
               epoch_now: Callable[[], int] | None = None,
               state_changed: Callable[[], None] = lambda: None,
               secret: bytes | None = None, records: CheckpointRecords | None = None) -> CheckpointDriver | None:
    """The driver of an effectively-once topology (None in the other modes). ``epoch``: the
    master's election epoch: checkpoint and restore ids come from it."""
    if not effectively_once(topo.config):
        return None
    cfg = StatefulConfig.from_config(topo.config)
    log.info("effectively once: a checkpoint every %gs, kept in %s", cfg.interval_s,
             checkpoint_location(cfg, home))
    return CheckpointDriver(topology, {t.task_id: t.component for t in packing.tasks},
                            CoordinatorConfig.from_config(topo.config),
                            open_checkpoint_storage(cfg, home, secret=secret),
                            epoch=epoch, send_all=send_all, log=log,
                            session_ok=session_ok, epoch_now=epoch_now, state_changed=state_changed,
                            records=records)


async def tick_forever(driver: CheckpointDriver, stopped: asyncio.Event, period_s: float = 0.2) -> None:
    """The driver's life on the master's loop: the storage listed off the loop, then the coordinator's clock."""
    await driver.run(stopped, period_s)
