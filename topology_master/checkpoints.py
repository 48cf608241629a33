"""The active master's driver of effectively once: it feeds the coordinator
(heron_py/checkpoint/coordinator.py, the rules) with time, the tasks' reports and failures, and
carries out its actions: commands to every stream manager, completion in the storage.

Failures are seen in what the stream managers report of their instances: a task that was
ready and is now gone, or is back with another pid, or a stream manager that disconnected.
The first restore happens once every task is ready (a master that took over restores too: it
cannot know what the tasks did while no master watched).

Restore ids go on the wire as ``base + n``, ``base`` the master's start time in microseconds,
so a master that took over never reuses an id its predecessor sent (instances and stream
managers ignore a restore older than the newest they took).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from heron_py.checkpoint.coordinator import (
    CheckpointAborted,
    CheckpointComplete,
    CheckpointCoordinator,
    CoordinatorAction,
    CoordinatorConfig,
    CoordinatorState,
    RestoreFailed,
    StartCheckpoint,
    StartProcessing,
    StartRestore,
)
from heron_py.checkpoint.storage import CheckpointStorage, LocalFsStorage, checkpoint_root
from heron_py.common.config import StatefulConfig, effectively_once
from heron_py.common.framing import MsgType, encode_frame
from heron_py.common.net import Connection, parse
from heron_py.planner.model import PackingPlan, TopologyDef
from proto import heron_py_pb2 as pb

# a checkpoint's markers wait behind the tuples queued before them, which under full load
# (queues and stream manager buffers up to their watermarks) takes longer than a short interval;
# aborting at the interval would then never complete one (measured: bench/eo_bench.py, 1 s)
MIN_DEFAULT_TIMEOUT_S = 60.0


def _timeout(config: StatefulConfig) -> float:
    """topology.stateful.checkpoint.timeout.seconds, else the interval but at least a minute; the
    next checkpoint starts when this one completed (or timed out), so under load checkpoints come
    as often as the tuples ahead of the markers allow."""
    return config.timeout_s if config.timeout_s is not None else max(config.interval_s, MIN_DEFAULT_TIMEOUT_S)


class CheckpointDriver:
    def __init__(self, topology: str, tasks: Mapping[int, str], config: StatefulConfig, storage: CheckpointStorage,
                 *, send_all: Callable[[bytes], None], log: logging.Logger,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.topology = topology
        self._storage = storage
        self._send_all = send_all
        self._log = log
        self._clock = clock
        self._wall = wall
        self._keep = config.keep
        ids = storage.checkpoint_ids(topology)
        self.coordinator = CheckpointCoordinator(
            CoordinatorConfig(interval_secs=config.interval_s, timeout_secs=_timeout(config),
                              start_clean=config.start_clean, keep_completed=config.keep),
            tasks, completed=storage.completed_ids(topology), first_id=(max(ids) + 1) if ids else None)
        self._rid_base = int(wall() * 1_000_000)
        self._restore_frame: bytes | None = None  # the restore under way, for late stream managers
        self._pids: dict[int, int] = {}  # task -> pid while ready, as last seen
        self._ntasks = len(tasks)
        self.last_completed_wall: float | None = None

    # --- inputs ---
    def tick(self) -> None:
        self._apply(self.coordinator.tick(self._clock()))

    def on_instances(self, instances: Mapping[int, Mapping[str, Any]], cause: str = "") -> None:
        """The master's view of every task (component, container, pid, ready) changed."""
        gone = []
        for task, info in instances.items():
            pid = int(info.get("pid", 0)) if info.get("ready") else 0
            old = self._pids.get(task)
            if old is not None and old != pid:
                gone.append(f"task {task} (pid {old}) " + ("restarted" if pid else "is gone"))
            if pid:
                self._pids[task] = pid
            else:
                self._pids.pop(task, None)
        state = self.coordinator.state
        if state is CoordinatorState.STARTING:
            if len(self._pids) == self._ntasks:
                self._log.info("every task is ready: restoring before processing")
                self._apply(self.coordinator.start(self._clock()))
        elif gone and state is not CoordinatorState.FAILED:
            reason = (cause + ": " if cause else "") + ", ".join(gone)
            self._log.warning("effectively once: %s; rolling every task back", reason)
            self._apply(self.coordinator.on_failure(self._clock(), reason))

    def greet(self, conn: Connection) -> None:
        """A stream manager registered: mid-restore it gets the restore (its tasks are waited for)."""
        if self.coordinator.state is CoordinatorState.RESTORING and self._restore_frame is not None:
            conn.send(self._restore_frame)

    def on_report(self, msg_type: int, frame: bytes) -> None:
        """CHECKPOINT_SAVED or STATE_RESTORED from an instance, through its stream manager."""
        now = self._clock()
        if msg_type == MsgType.CHECKPOINT_SAVED:
            saved = pb.CheckpointSaved()
            parse(saved, frame)
            self._apply(self.coordinator.on_task_saved(saved.checkpoint_id, saved.task_id, saved.size_bytes,
                                                       saved.duration_secs, now))
        elif msg_type == MsgType.STATE_RESTORED:
            done = pb.StateRestored()
            parse(done, frame)
            self._apply(self.coordinator.on_task_restored(done.restore_id - self._rid_base, done.task_id, done.ok,
                                                          now, done.error))

    # --- actions ---
    def _apply(self, actions: Iterable[CoordinatorAction]) -> None:
        for a in actions:
            if isinstance(a, StartCheckpoint):
                self._send(MsgType.START_CHECKPOINT, pb.StartCheckpoint(checkpoint_id=a.checkpoint_id))
            elif isinstance(a, CheckpointComplete):
                self._complete(a)
            elif isinstance(a, CheckpointAborted):
                self._log.warning("checkpoint %d aborted: %s", a.checkpoint_id, a.reason)
            elif isinstance(a, StartRestore):
                what = "a clean start" if a.checkpoint_id is None else f"checkpoint {a.checkpoint_id}"
                self._log.info("restore %d to %s (%s)", a.restore_id, what, a.reason)
                self._restore_frame = encode_frame(MsgType.RESTORE_STATE, pb.RestoreState(
                    restore_id=self._rid_base + a.restore_id, checkpoint_id=a.checkpoint_id or 0,
                    reason=a.reason).SerializeToString())
                self._send_all(self._restore_frame)
            elif isinstance(a, StartProcessing):
                self._log.info("every task restored (restore %d): processing", a.restore_id)
                self._send(MsgType.START_PROCESSING, pb.StartProcessing(restore_id=self._rid_base + a.restore_id))
            elif isinstance(a, RestoreFailed):
                self._log.error("effectively once: restore failed, the topology needs an operator: %s", a.reason)

    def _complete(self, done: CheckpointComplete) -> None:
        c = done.checkpoint
        try:
            self._storage.mark_complete(self.topology, c.checkpoint_id)
            self._storage.gc(self.topology, keep_last=self._keep)
        except Exception as e:  # the coordinator counts it complete; a restore would then fall back
            self._log.error("checkpoint %d: every task saved, but marking it complete failed: %s", c.checkpoint_id, e)
            return
        self.last_completed_wall = self._wall()
        self._log.info("checkpoint %d complete: %d tasks, %d bytes, %.1f ms", c.checkpoint_id, len(c.tasks),
                       c.size_bytes, c.duration_secs * 1000)

    def _send(self, msg_type: int, msg: Any) -> None:
        self._send_all(encode_frame(msg_type, msg.SerializeToString()))

    def status(self) -> dict[str, Any]:
        """For status, the HTTP API and metrics."""
        s = self.coordinator.status()
        return {
            "state": s.state.value, "in_progress_id": s.in_progress_id, "in_progress_saved": s.in_progress_saved,
            "tasks": s.tasks, "last_completed_id": s.last_completed_id,
            "last_completed_time": self.last_completed_wall if s.last_completed_at is not None else None,
            "last_duration_secs": s.last_duration_secs, "last_size_bytes": s.last_size_bytes,
            "components": {c.component: {"tasks": c.tasks, "size_bytes": c.size_bytes,
                                         "max_duration_secs": c.max_duration_secs} for c in s.components},
            "restore_checkpoint_id": s.restore_checkpoint_id, "failure": s.failure,
        }


def driver_for(topology: str, topo: TopologyDef, packing: PackingPlan, home: Path, *,
               send_all: Callable[[bytes], None], log: logging.Logger) -> CheckpointDriver | None:
    """The driver of an effectively-once topology (None in the other modes)."""
    if not effectively_once(topo.config):
        return None
    cfg = StatefulConfig.from_config(topo.config)
    root = checkpoint_root(home, cfg.root)
    log.info("effectively once: a checkpoint every %gs, kept in %s", cfg.interval_s, root)
    return CheckpointDriver(topology, {t.task_id: t.component for t in packing.tasks}, cfg, LocalFsStorage(root),
                            send_all=send_all, log=log)


async def tick_forever(driver: CheckpointDriver, stopped: asyncio.Event, period_s: float = 0.2) -> None:
    """The coordinator's clock: due checkpoints start and late ones time out."""
    while not stopped.is_set():
        driver.tick()
        try:
            await asyncio.wait_for(stopped.wait(), period_s)
        except TimeoutError:
            pass
