"""The topology master's side of effectively-once checkpoints: when to checkpoint, when one is
complete, and the restore (rollback) after a failure.

Heron splits this over tmanager's stateful-controller, -checkpointer and -restorer
(heron/tmanager/src/cpp/manager/). Here it is one state machine that does no I/O and reads no
clock: every event carries ``now`` (seconds, any monotonic origin) and returns the actions the
master carries out, in order.

Decisions:
- Checkpoint ids are ints, strictly increasing for the coordinator's life and never reused after
  a restore. Across master restarts the caller passes ``first_id`` above every id the storage
  holds (complete or not), so a stale partial checkpoint is never taken for a new one.
- One checkpoint at a time: a new one starts only when the previous completed or was aborted
  (at its timeout, which defaults to the interval, so a late checkpoint is replaced at the next
  interval as in Heron, where a newer id supersedes the partial one).
- Restore is all-or-nothing as in Heron: any failure rolls every task back to the newest
  completed checkpoint; a task that cannot load it makes the whole topology fall back to the
  next older one, then to a clean start (the ``StartRestore`` says so in its reason).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TypeAlias

from heron_py.api.api_constants import (
    TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS,
    TOPOLOGY_STATEFUL_START_CLEAN,
)

# our own keys, no Heron equivalent (Heron has no checkpoint timeout and no restore timeout)
TOPOLOGY_STATEFUL_CHECKPOINT_TIMEOUT_SECONDS = "topology.stateful.checkpoint.timeout.seconds"
TOPOLOGY_STATEFUL_RESTORE_TIMEOUT_SECONDS = "topology.stateful.restore.timeout.seconds"
DEFAULT_RESTORE_TIMEOUT_SECS = 120.0
DEFAULT_KEEP_COMPLETED = 2  # matches the storage's default keep_last


class CoordinatorState(Enum):
    STARTING = "starting"  # created, start() not called: no task processes yet
    RESTORING = "restoring"  # every task loads a checkpoint (or starts clean); waiting for all
    IDLE = "idle"  # tasks process; the next checkpoint starts at its due time
    CHECKPOINTING = "checkpointing"  # one checkpoint under way; waiting for every task's save
    FAILED = "failed"  # not even a clean start could be restored: needs an operator


@dataclass(frozen=True)
class CoordinatorConfig:
    interval_secs: float
    timeout_secs: float | None = None  # None: the interval
    restore_timeout_secs: float = DEFAULT_RESTORE_TIMEOUT_SECS
    start_clean: bool = False
    keep_completed: int = DEFAULT_KEEP_COMPLETED

    def __post_init__(self) -> None:
        for name in ("interval_secs", "restore_timeout_secs"):
            if not getattr(self, name) > 0:
                raise ValueError(f"checkpoint config: {name} must be > 0, found {getattr(self, name)!r}")
        if self.timeout_secs is not None and not self.timeout_secs > 0:
            raise ValueError(f"checkpoint config: timeout_secs must be > 0 or None, found {self.timeout_secs!r}")
        if self.keep_completed < 1:
            raise ValueError(f"checkpoint config: keep_completed must be >= 1, found {self.keep_completed}")

    @property
    def effective_timeout_secs(self) -> float:
        return self.interval_secs if self.timeout_secs is None else self.timeout_secs

    @classmethod
    def from_topology_config(cls, conf: Mapping[str, object]) -> CoordinatorConfig:
        """Read the topology's config; the interval is required in effectively-once mode."""
        key = TOPOLOGY_STATEFUL_CHECKPOINT_INTERVAL_SECONDS
        if key not in conf:
            raise ValueError(f"topology config: {key} is required in effectively-once mode, found no value")
        tkey = TOPOLOGY_STATEFUL_CHECKPOINT_TIMEOUT_SECONDS
        return cls(interval_secs=_number(conf, key),
                   timeout_secs=None if conf.get(tkey) is None else _number(conf, tkey),
                   restore_timeout_secs=_number(conf, TOPOLOGY_STATEFUL_RESTORE_TIMEOUT_SECONDS,
                                                DEFAULT_RESTORE_TIMEOUT_SECS),
                   start_clean=_flag(conf, TOPOLOGY_STATEFUL_START_CLEAN))


def _number(conf: Mapping[str, object], key: str, default: float | None = None) -> float:
    value = conf.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"topology config: {key} must be a number of seconds, found {value!r}")
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"topology config: {key} must be a number of seconds, found {value!r}") from None


def _flag(conf: Mapping[str, object], key: str) -> bool:
    value = conf.get(key, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ValueError(f"topology config: {key} must be true or false, found {value!r}")


@dataclass(frozen=True)
class TaskSave:
    task_id: int
    component: str
    size_bytes: int
    duration_secs: float


@dataclass(frozen=True)
class ComponentStats:
    component: str
    tasks: int
    size_bytes: int
    max_duration_secs: float  # the slowest task's save


@dataclass(frozen=True)
class CompletedCheckpoint:
    checkpoint_id: int
    started_at: float
    completed_at: float
    tasks: tuple[TaskSave, ...]

    @property
    def duration_secs(self) -> float:
        return self.completed_at - self.started_at

    @property
    def size_bytes(self) -> int:
        return sum(t.size_bytes for t in self.tasks)

    def per_component(self) -> tuple[ComponentStats, ...]:
        by: dict[str, list[TaskSave]] = {}
        for t in self.tasks:
            by.setdefault(t.component, []).append(t)
        return tuple(ComponentStats(c, len(ts), sum(t.size_bytes for t in ts), max(t.duration_secs for t in ts))
                     for c, ts in sorted(by.items()))


@dataclass(frozen=True)
class StartCheckpoint:
    """Tell every stream manager to start checkpoint ``checkpoint_id`` at its spouts."""

    checkpoint_id: int


@dataclass(frozen=True)
class CheckpointComplete:
    """Every task saved: mark it complete in the storage (then gc) before relying on it."""

    checkpoint: CompletedCheckpoint


@dataclass(frozen=True)
class CheckpointAborted:
    checkpoint_id: int
    reason: str


@dataclass(frozen=True)
class StartRestore:
    """Tell every task to drop in-flight data and load ``checkpoint_id`` (None: start clean)."""

    restore_id: int
    checkpoint_id: int | None
    reason: str


@dataclass(frozen=True)
class StartProcessing:
    """Every task restored: tell them all to process again (spouts replay from the restore)."""

    restore_id: int
    checkpoint_id: int | None


@dataclass(frozen=True)
class RestoreFailed:
    reason: str


@dataclass(frozen=True)
class Ignored:
    """An event that changed nothing (late, duplicate or from an unknown task), for logs/metrics."""

    reason: str


CoordinatorAction: TypeAlias = (StartCheckpoint | CheckpointComplete | CheckpointAborted | StartRestore
                                | StartProcessing | RestoreFailed | Ignored)


@dataclass(frozen=True)
class CheckpointStatus:
    """What ``status`` and the HTTP API show."""

    state: CoordinatorState
    in_progress_id: int | None
    in_progress_saved: int  # tasks that saved the checkpoint under way
    tasks: int
    last_completed_id: int | None
    last_completed_at: float | None  # None when only known from the storage (before this master)
    last_duration_secs: float | None
    last_size_bytes: int | None
    components: tuple[ComponentStats, ...]
    restore_checkpoint_id: int | None  # while RESTORING: the target (None: clean start)
    failure: str | None = None


@dataclass
class _InFlight:
    checkpoint_id: int
    started_at: float
    saved: dict[int, TaskSave] = field(default_factory=dict)


@dataclass
class _Restore:
    restore_id: int
    checkpoint_id: int | None
    started_at: float
    waiting: set[int]


class CheckpointCoordinator:
    """The master's checkpoint state machine over the tasks of one physical plan."""

    def __init__(self, config: CoordinatorConfig, tasks: Mapping[int, str], completed: Iterable[int] = (),
                 first_id: int | None = None) -> None:
        """``tasks``: task id -> component name. ``completed``: ids the storage holds as complete.

        ``first_id``: the first id to use, above every id in the storage; default one above the
        newest completed (or 1).
        """
        if not tasks:
            raise ValueError("checkpoint coordinator: a topology needs at least one task, found none")
        self.config = config
        self._tasks = dict(tasks)
        self._completed = sorted(set(completed))[-config.keep_completed:]
        newest = self._completed[-1] if self._completed else 0
        if first_id is not None and first_id <= newest:
            raise ValueError(f"checkpoint coordinator: first_id must be above the newest completed "
                             f"checkpoint {newest}, found {first_id}")
        self._next_id = newest + 1 if first_id is None else first_id
        self._state = CoordinatorState.STARTING
        self._next_due = 0.0
        self._in_flight: _InFlight | None = None
        self._restore: _Restore | None = None
        self._restore_ids = 0
        self._last: CompletedCheckpoint | None = None
        self._failure: str | None = None

    @property
    def state(self) -> CoordinatorState:
        return self._state

    def start(self, now: float) -> list[CoordinatorAction]:
        """The topology starts: every task restores first (Heron does the same), then processes."""
        if self._state is not CoordinatorState.STARTING:
            return [Ignored(f"start in state {self._state.value}, expected starting")]
        if self.config.start_clean:
            # the previous run's checkpoints must not come back at a later failure either
            self._completed = []
            return self._begin_restore(now, None, "topology start (topology.stateful.start.clean)")
        target = self._completed[-1] if self._completed else None
        return self._begin_restore(now, target, "topology start")

    def tick(self, now: float) -> list[CoordinatorAction]:
        """Call at least every second or so: starts due checkpoints, times out late ones."""
        out: list[CoordinatorAction] = []
        if self._state is CoordinatorState.RESTORING:
            assert self._restore is not None
            if now - self._restore.started_at >= self.config.restore_timeout_secs:
                out += self._begin_restore(now, self._restore.checkpoint_id,
                                           f"restore {self._restore.restore_id} timed out after "
                                           f"{self.config.restore_timeout_secs}s waiting for tasks "
                                           f"{sorted(self._restore.waiting)}")
            return out
        if self._state is CoordinatorState.CHECKPOINTING:
            assert self._in_flight is not None
            if now - self._in_flight.started_at >= self.config.effective_timeout_secs:
                missing = sorted(set(self._tasks) - set(self._in_flight.saved))
                out.append(self._abort(f"timed out after {self.config.effective_timeout_secs}s "
                                       f"waiting for tasks {missing}"))
        if self._state is CoordinatorState.IDLE and now >= self._next_due:
            cid = self._next_id
            self._next_id += 1
            self._in_flight = _InFlight(cid, now)
            self._state = CoordinatorState.CHECKPOINTING
            self._next_due = now + self.config.interval_secs
            out.append(StartCheckpoint(cid))
        return out

    def on_task_saved(self, checkpoint_id: int, task_id: int, size_bytes: int, duration_secs: float,
                      now: float) -> list[CoordinatorAction]:
        """A task saved its state for ``checkpoint_id`` (the storage write finished)."""
        flight = self._in_flight
        if task_id not in self._tasks:
            return [Ignored(f"task {task_id} saved checkpoint {checkpoint_id}: not a task of the plan")]
        if flight is None or flight.checkpoint_id != checkpoint_id:
            current = "none" if flight is None else str(flight.checkpoint_id)
            return [Ignored(f"task {task_id} saved checkpoint {checkpoint_id}: not under way "
                            f"(state {self._state.value}, under way {current})")]
        flight.saved[task_id] = TaskSave(task_id, self._tasks[task_id], size_bytes, duration_secs)
        if len(flight.saved) < len(self._tasks):
            return []
        done = CompletedCheckpoint(checkpoint_id, flight.started_at, now,
                                   tuple(flight.saved[t] for t in sorted(flight.saved)))
        self._last = done
        self._completed = [*self._completed, checkpoint_id][-self.config.keep_completed:]
        self._in_flight = None
        self._state = CoordinatorState.IDLE
        return [CheckpointComplete(done)]

    def on_failure(self, now: float, reason: str, tasks: Mapping[int, str] | None = None) -> list[CoordinatorAction]:
        """A task or stream manager failed (or the plan changed: pass the new ``tasks``).

        Every task rolls back to the newest completed checkpoint, or starts clean when none.
        """
        if self._state is CoordinatorState.FAILED:
            return [Ignored(f"failure ({reason}) while failed: {self._failure}")]
        out: list[CoordinatorAction] = []
        if self._state is CoordinatorState.CHECKPOINTING:
            out.append(self._abort(f"failure: {reason}"))
        if tasks is not None:
            if not tasks:
                raise ValueError("checkpoint coordinator: a topology needs at least one task, found none")
            self._tasks = dict(tasks)
        target = self._completed[-1] if self._completed else None
        out += self._begin_restore(now, target, f"failure: {reason}")
        return out

    def on_task_restored(self, restore_id: int, task_id: int, ok: bool, now: float,
                         error: str = "") -> list[CoordinatorAction]:
        """A task dropped its in-flight data and loaded the restore's checkpoint (``ok``), or could not."""
        r = self._restore
        if r is None or r.restore_id != restore_id:
            current = "none" if r is None else str(r.restore_id)
            return [Ignored(f"task {task_id} restored for restore {restore_id}: not under way (under way {current})")]
        if task_id not in self._tasks:
            return [Ignored(f"task {task_id} restored for restore {restore_id}: not a task of the plan")]
        if not ok:
            return self._fall_back(now, task_id, error)
        r.waiting.discard(task_id)
        if r.waiting:
            return []
        self._restore = None
        self._state = CoordinatorState.IDLE
        self._next_due = now + self.config.interval_secs
        return [StartProcessing(r.restore_id, r.checkpoint_id)]

    def status(self) -> CheckpointStatus:
        last, flight = self._last, self._in_flight
        last_id = self._completed[-1] if self._completed else None
        known = last is not None and last.checkpoint_id == last_id
        return CheckpointStatus(
            state=self._state, in_progress_id=None if flight is None else flight.checkpoint_id,
            in_progress_saved=0 if flight is None else len(flight.saved), tasks=len(self._tasks),
            last_completed_id=last_id,
            last_completed_at=last.completed_at if known and last else None,
            last_duration_secs=last.duration_secs if known and last else None,
            last_size_bytes=last.size_bytes if known and last else None,
            components=last.per_component() if known and last else (),
            restore_checkpoint_id=None if self._restore is None else self._restore.checkpoint_id,
            failure=self._failure)

    def _abort(self, reason: str) -> CheckpointAborted:
        assert self._in_flight is not None
        cid = self._in_flight.checkpoint_id
        self._in_flight = None
        self._state = CoordinatorState.IDLE
        return CheckpointAborted(cid, reason)

    def _begin_restore(self, now: float, checkpoint_id: int | None, reason: str) -> list[CoordinatorAction]:
        # a new restore id for every attempt, so a late answer to an older attempt is ignored
        self._restore_ids += 1
        self._restore = _Restore(self._restore_ids, checkpoint_id, now, set(self._tasks))
        self._state = CoordinatorState.RESTORING
        return [StartRestore(self._restore_ids, checkpoint_id, reason)]

    def _fall_back(self, now: float, task_id: int, error: str) -> list[CoordinatorAction]:
        assert self._restore is not None
        failed = self._restore.checkpoint_id
        why = f"task {task_id} could not restore {'a clean start' if failed is None else f'checkpoint {failed}'}"
        why += f": {error}" if error else ""
        if failed is None:
            self._restore = None
            self._state = CoordinatorState.FAILED
            self._failure = why
            return [RestoreFailed(why)]
        # the unusable checkpoint and every newer one leave the list: never a target again
        self._completed = [c for c in self._completed if c < failed]
        if self._last is not None and self._last.checkpoint_id >= failed:
            self._last = None
        target = self._completed[-1] if self._completed else None
        then = "a clean start" if target is None else f"checkpoint {target}"
        return self._begin_restore(now, target, f"{why}; falling back to {then}")
