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
  completed checkpoint. When a task cannot load it:
  a transient error (heron_py/checkpoint/failures.py: ESTALE, EIO, EMFILE, MemoryError, the
  storage's gc race) restores the same checkpoint again after a backoff, and drops nothing; a
  permanent one (corrupt, incomplete, undecodable) drops only that checkpoint and falls back to
  the newest other one; with none left the topology waits for the operator
  (``WAITING_FOR_OPERATOR``, ``heron-py restore NAME --checkpoint ID | --clean``). A clean start
  happens on its own only when no checkpoint ever completed (or with
  topology.stateful.start.clean).
- A checkpoint counts as complete once its ``_COMPLETE`` marker is durable (``on_marked``), not
  when the last task saved: a marker lost to a full disk must never be a restore target.
- Checkpoints that fail in a row are counted (``CheckpointFailureManager``); at
  topology.stateful.max.consecutive.failures the status says so and ``CheckpointsFailing``
  carries the reasons for the master's log.
- Settings come from the one config table (``CoordinatorConfig.from_config``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, TypeAlias

from heron_py.checkpoint.failures import CheckpointFailureManager, backoff_secs, is_transient_load_error
from heron_py.checkpoint.storage import packing_of
from heron_py.common.config import MAX_FAILURES, RESTORE_TIMEOUT, StatefulConfig

# a checkpoint's markers wait behind the tuples queued before them, which under full load
# (queues and stream manager buffers up to their watermarks) takes longer than a short interval;
# aborting at the interval would then never complete one (measured: bench/eo_bench.py, 1 s)
MIN_DEFAULT_TIMEOUT_S = 60.0
DEFAULT_RESTORE_TIMEOUT_SECS = float(RESTORE_TIMEOUT.default)
DEFAULT_MAX_FAILURES = int(MAX_FAILURES.default)
DEFAULT_KEEP_COMPLETED = 2  # matches the storage's default keep_last


class CoordinatorState(Enum):
    STARTING = "starting"  # created, start() not called: no task processes yet
    RESTORING = "restoring"  # every task loads a checkpoint (or starts clean); waiting for all
    IDLE = "idle"  # tasks process; the next checkpoint starts at its due time
    CHECKPOINTING = "checkpointing"  # one checkpoint under way; waiting for every task's save
    COMMITTING = "committing"  # every task saved; waiting for the _COMPLETE marker to be durable
    # no checkpoint could be loaded (and a clean start is never automatic): the operator runs
    # heron-py restore NAME --checkpoint ID | --clean
    WAITING_FOR_OPERATOR = "waiting for the operator"


@dataclass(frozen=True)
class CoordinatorConfig:
    interval_secs: float
    timeout_secs: float | None = None  # None: the interval
    restore_timeout_secs: float = DEFAULT_RESTORE_TIMEOUT_SECS
    start_clean: bool = False
    keep_completed: int = DEFAULT_KEEP_COMPLETED
    max_consecutive_failures: int = DEFAULT_MAX_FAILURES
    # a transient restore error retries the same checkpoint after 1, 2, 4 ... up to 30 s
    retry_initial_secs: float = 1.0
    retry_max_secs: float = 30.0

    def __post_init__(self) -> None:
        for name in ("interval_secs", "restore_timeout_secs", "retry_initial_secs", "retry_max_secs"):
            if not getattr(self, name) > 0:
                raise ValueError(f"checkpoint config: {name} must be > 0, found {getattr(self, name)!r}")
        if self.timeout_secs is not None and not self.timeout_secs > 0:
            raise ValueError(f"checkpoint config: timeout_secs must be > 0 or None, found {self.timeout_secs!r}")
        if self.keep_completed < 1:
            raise ValueError(f"checkpoint config: keep_completed must be >= 1, found {self.keep_completed}")
        if self.max_consecutive_failures < 1:
            raise ValueError(f"checkpoint config: max_consecutive_failures must be >= 1, found "
                             f"{self.max_consecutive_failures}")

    @property
    def effective_timeout_secs(self) -> float:
        return self.interval_secs if self.timeout_secs is None else self.timeout_secs

    @classmethod
    def from_config(cls, conf: Mapping[str, Any]) -> CoordinatorConfig:
        """From the topology's config through the one config table (heron_py/common/config.py)."""
        return cls.from_stateful(StatefulConfig.from_config(conf))

    @classmethod
    def from_stateful(cls, s: StatefulConfig) -> CoordinatorConfig:
        """topology.stateful.checkpoint.timeout.seconds, else the interval but at least a minute:
        the next checkpoint starts when this one completed (or timed out), so under load
        checkpoints come as often as the tuples ahead of the markers allow."""
        timeout = s.timeout_s if s.timeout_s is not None else max(s.interval_s, MIN_DEFAULT_TIMEOUT_S)
        return cls(interval_secs=s.interval_s, timeout_secs=timeout, restore_timeout_secs=s.restore_timeout_s,
                   start_clean=s.start_clean, keep_completed=s.keep, max_consecutive_failures=s.max_failures)


@dataclass(frozen=True)
class TaskSave:
    task_id: int
    component: str
    size_bytes: int
    duration_secs: float
    stored: bool = True  # wrote state (a stateful component); a stateless task saves nothing


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

    @property
    def stored(self) -> tuple[int, ...]:
        """The tasks whose state is in the storage: the marker lists these."""
        return tuple(t.task_id for t in self.tasks if t.stored)

    @property
    def packing(self) -> dict[str, tuple[int, ...]]:
        """Component → its task ids: the plan this checkpoint was taken under."""
        return packing_of({t.task_id: t.component for t in self.tasks})

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
    """Every task saved: write the ``_COMPLETE`` marker durably, then report it with
    ``on_marked``. The id counts as complete only then (a marker lost to a full disk must not
    be a restore target)."""

    checkpoint: CompletedCheckpoint


@dataclass(frozen=True)
class CheckpointCommitted:
    """The marker is durable: the checkpoint is a restore target; old ones may be collected,
    except ``protect`` (the checkpoint the running tasks restored from, and the kept ones)."""

    checkpoint_id: int
    protect: tuple[int, ...]


@dataclass(frozen=True)
class CheckpointAborted:
    checkpoint_id: int
    reason: str


@dataclass(frozen=True)
class CheckpointDiscarded:
    """A checkpoint whose marker became durable after a loss of in-flight data was reported
    while it was committing: it may hold the loss, so it is no restore target and the master
    removes it from the storage (a successor master must not find it complete either)."""

    checkpoint_id: int
    reason: str


@dataclass(frozen=True)
class CheckpointsFailing:
    """``consecutive`` checkpoints failed in a row (the configured limit): the master logs the reasons."""

    consecutive: int
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class CheckpointsRecovered:
    """A checkpoint completed after a streak of failures that had reached the limit."""

    checkpoint_id: int


@dataclass(frozen=True)
class StartRestore:
    """Tell every task to drop in-flight data and load ``checkpoint_id`` (None: start clean)."""

    restore_id: int
    checkpoint_id: int | None
    reason: str


@dataclass(frozen=True)
class RestoreRetry:
    """A task hit a transient error loading ``checkpoint_id``: the same checkpoint is restored
    again (a new ``StartRestore``) after ``delay_secs``."""

    restore_id: int
    checkpoint_id: int | None
    attempt: int
    delay_secs: float
    reason: str


@dataclass(frozen=True)
class StartProcessing:
    """Every task restored: tell them all to process again (spouts replay from the restore)."""

    restore_id: int
    checkpoint_id: int | None


@dataclass(frozen=True)
class RestoreFailed:
    """No checkpoint could be loaded: the topology waits for the operator (never a clean start on its own)."""

    reason: str


@dataclass(frozen=True)
class Ignored:
    """An event that changed nothing (late, duplicate or from an unknown task), for logs/metrics."""

    reason: str


CoordinatorAction: TypeAlias = (StartCheckpoint | CheckpointComplete | CheckpointCommitted | CheckpointAborted
                                | CheckpointDiscarded | CheckpointsFailing | CheckpointsRecovered | StartRestore
                                | RestoreRetry | StartProcessing | RestoreFailed | Ignored)


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
    failure: str | None = None  # while WAITING_FOR_OPERATOR: why
    consecutive_failures: int = 0
    failing: bool = False  # consecutive_failures reached topology.stateful.max.consecutive.failures
    failure_reasons: tuple[str, ...] = ()
    restore_attempt: int = 0  # retries of the same checkpoint after transient errors
    restore_error: str | None = None  # the transient error being retried
    loaded_id: int | None = None  # the checkpoint the running tasks restored from


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
    attempt: int = 0  # 0: first try; n: the n-th retry after transient errors
    retry_at: float | None = None  # a retry is scheduled (a transient error came)
    error: str | None = None


class CheckpointCoordinator:
    """The master's checkpoint state machine over the tasks of one physical plan."""

    def __init__(self, config: CoordinatorConfig, tasks: Mapping[int, str], completed: Iterable[int] = (),
                 first_id: int | None = None, recorded: int = 0) -> None:
        """``tasks``: task id -> component name. ``completed``: ids the storage holds as complete.

        ``first_id``: the first id to use, above every id in the storage; default one above the
        newest completed (or 1). ``recorded``: the newest id the state manager recorded as
        complete (0: none): a storage whose newest complete id is older was not seen whole (a
        folder not mounted, a flushed Redis), and the first restore waits for the operator
        instead of starting clean or from an older checkpoint.
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
        self._committing: CompletedCheckpoint | None = None  # every task saved; marker not durable yet
        self._ruled_out: dict[int, str] = {}  # committing when data was lost: never a target, and why
        self._restore: _Restore | None = None
        self._restore_ids = 0
        self._last: CompletedCheckpoint | None = None
        self._loaded: int | None = None  # what the running tasks restored from (gc keeps it)
        self._failure: str | None = None
        self._recorded = recorded
        self.failures = CheckpointFailureManager(config.max_consecutive_failures)

    @property
    def state(self) -> CoordinatorState:
        return self._state

    @property
    def restore_seq(self) -> int:
        """The number of the newest restore started (0: none yet)."""
        return self._restore_ids

    @property
    def completed(self) -> tuple[int, ...]:
        """The restore targets, oldest first."""
        return tuple(self._completed)

    def start(self, now: float) -> list[CoordinatorAction]:
        """The topology starts: every task restores first (Heron does the same), then processes."""
        if self._state is not CoordinatorState.STARTING:
            return [Ignored(f"start in state {self._state.value}, expected starting")]
        if self.config.start_clean:
            # the previous run's checkpoints must not come back at a later failure either
            self._completed = []
            return self._begin_restore(now, None, "topology start (topology.stateful.start.clean)")
        target = self._completed[-1] if self._completed else None
        if self._recorded and (target is None or target < self._recorded):
            # the storage does not show what completed: restoring what it shows would drop state
            self._state = CoordinatorState.WAITING_FOR_OPERATOR
            shows = "no complete checkpoint" if target is None else f"checkpoint {target} as the newest complete one"
            self._failure = (f"checkpoint {self._recorded} completed (the state manager recorded it), but the "
                             f"checkpoint storage shows {shows}: is it the storage the topology used, mounted "
                             f"and whole? Waiting for the operator (heron-py restore NAME --checkpoint ID | --clean)")
            return [RestoreFailed(self._failure)]
        # no complete checkpoint at all: the topology's first run, so empty state is the truth
        return self._begin_restore(now, target, "topology start")

    @property
    def issued_up_to(self) -> int:
        """The newest checkpoint id this coordinator handed out (0: none)."""
        return self._next_id - 1

    def next_deadline(self) -> float | None:
        """When ``tick`` next acts on its own: a restore's retry or timeout, a committing or an
        in-flight checkpoint's timeout, the next checkpoint's due time; None when only an event
        moves this coordinator (starting, failed, waiting for the operator). A driver whose clock
        jumps from event to event (the test harness) ticks then; the master ticks every second."""
        timeout = self.config.effective_timeout_secs
        if self._state is CoordinatorState.RESTORING:
            r = self._restore
            assert r is not None
            return r.retry_at if r.retry_at is not None else r.started_at + self.config.restore_timeout_secs
        if self._state is CoordinatorState.COMMITTING:
            assert self._committing is not None
            return self._committing.completed_at + timeout
        if self._state is CoordinatorState.CHECKPOINTING:
            assert self._in_flight is not None
            return self._in_flight.started_at + timeout
        if self._state is CoordinatorState.IDLE:
            return self._next_due
        return None

    def tick(self, now: float) -> list[CoordinatorAction]:
        """Call at least every second or so: starts due checkpoints, times out late ones, retries restores."""
        out: list[CoordinatorAction] = []
        if self._state is CoordinatorState.RESTORING:
            r = self._restore
            assert r is not None
            if r.retry_at is not None:
                if now >= r.retry_at:
                    out += self._begin_restore(now, r.checkpoint_id, f"retry {r.attempt} after a transient "
                                               f"error: {r.error}", attempt=r.attempt, error=r.error)
            elif now - r.started_at >= self.config.restore_timeout_secs:
                out += self._begin_restore(now, r.checkpoint_id,
                                           f"restore {r.restore_id} timed out after "
                                           f"{self.config.restore_timeout_secs}s waiting for tasks "
                                           f"{sorted(r.waiting)}")
            return out
        if self._state is CoordinatorState.COMMITTING:
            done = self._committing
            assert done is not None
            if now - done.completed_at >= self.config.effective_timeout_secs:
                # a hung storage (an NFS server gone) must not stop checkpoints for good; a
                # marker that lands later still makes the checkpoint a target (on_marked)
                self._state = CoordinatorState.IDLE
                out += self._failed(done.checkpoint_id, f"its complete marker was not durable after "
                                    f"{self.config.effective_timeout_secs}s")
        if self._state is CoordinatorState.CHECKPOINTING:
            assert self._in_flight is not None
            if now - self._in_flight.started_at >= self.config.effective_timeout_secs:
                missing = sorted(set(self._tasks) - set(self._in_flight.saved))
                out += self._abort(f"timed out after {self.config.effective_timeout_secs}s "
                                   f"waiting for tasks {missing}")
        if self._state is CoordinatorState.IDLE and now >= self._next_due:
            cid = self._next_id
            self._next_id += 1
            self._in_flight = _InFlight(cid, now)
            self._state = CoordinatorState.CHECKPOINTING
            self._next_due = now + self.config.interval_secs
            out.append(StartCheckpoint(cid))
        return out

    def on_task_save_failed(self, checkpoint_id: int, task_id: int, error: str) -> list[CoordinatorAction]:
        """A task could not save its state for ``checkpoint_id`` (a full disk): that checkpoint can
        never complete, so it is aborted now rather than at its timeout; the next one starts at the
        next interval."""
        flight = self._in_flight
        if flight is None or flight.checkpoint_id != checkpoint_id or self._state is not CoordinatorState.CHECKPOINTING:
            return [Ignored(f"task {task_id} could not save checkpoint {checkpoint_id}: not under way")]
        return self._abort(f"task {task_id} could not save its state: {error}")

    def on_task_saved(self, checkpoint_id: int, task_id: int, size_bytes: int, duration_secs: float,
                      now: float, *, stored: bool = True) -> list[CoordinatorAction]:
        """A task saved its state for ``checkpoint_id`` (the storage write finished; ``stored``:
        it wrote state, a stateless task saves nothing)."""
        flight = self._in_flight
        if task_id not in self._tasks:
            return [Ignored(f"task {task_id} saved checkpoint {checkpoint_id}: not a task of the plan")]
        if flight is None or flight.checkpoint_id != checkpoint_id:
            current = "none" if flight is None else str(flight.checkpoint_id)
            return [Ignored(f"task {task_id} saved checkpoint {checkpoint_id}: not under way "
                            f"(state {self._state.value}, under way {current})")]
        flight.saved[task_id] = TaskSave(task_id, self._tasks[task_id], size_bytes, duration_secs, stored)
        if len(flight.saved) < len(self._tasks):
            return []
        done = CompletedCheckpoint(checkpoint_id, flight.started_at, now,
                                   tuple(flight.saved[t] for t in sorted(flight.saved)))
        self._in_flight = None
        self._committing = done
        self._state = CoordinatorState.COMMITTING
        return [CheckpointComplete(done)]

    def on_marked(self, checkpoint_id: int, now: float, error: str | None = None) -> list[CoordinatorAction]:
        """The ``_COMPLETE`` marker of ``checkpoint_id`` is durable (``error`` None) or could not be written."""
        done = self._committing
        if done is None or done.checkpoint_id != checkpoint_id:
            return [Ignored(f"checkpoint {checkpoint_id} marked: not being committed")]
        self._committing = None
        current = self._state is CoordinatorState.COMMITTING
        if current:
            self._state = CoordinatorState.IDLE
        if error is not None:
            # not a restore target: the storage does not hold it as complete
            self._ruled_out.pop(checkpoint_id, None)
            return self._failed(checkpoint_id, f"every task saved, but its complete marker could not be "
                                f"written: {error}")
        ruled_out = self._ruled_out.pop(checkpoint_id, None)
        if ruled_out is not None:
            return [CheckpointDiscarded(checkpoint_id, ruled_out)]
        # durable even when a restore began meanwhile: a consistent snapshot, so a target as any
        self._completed = sorted({*self._completed, checkpoint_id})[-self.config.keep_completed:]
        out: list[CoordinatorAction] = []
        if current:
            self._last = done
            if self.failures.succeeded().recovered:
                out.append(CheckpointsRecovered(checkpoint_id))
        out.insert(0, CheckpointCommitted(checkpoint_id, self._protected()))
        return out

    def on_failure(self, now: float, reason: str, tasks: Mapping[int, str] | None = None, *,
                   data_lost: bool = False) -> list[CoordinatorAction]:
        """A task or stream manager failed (or the plan changed: pass the new ``tasks``).

        Every task rolls back to the newest completed checkpoint, or starts clean when none ever completed.
        ``data_lost``: a stream manager reported in-flight data lost; a checkpoint committing
        now may hold that loss (its markers can pass where the lost tuples did not), so it never
        becomes a target, even when its marker lands. A task that died loses no data behind its
        own saved cut, so its committing checkpoint stays a target.
        """
        if self._state is CoordinatorState.WAITING_FOR_OPERATOR:
            return [Ignored(f"failure ({reason}) while waiting for the operator: {self._failure}")]
        out: list[CoordinatorAction] = []
        if self._state is CoordinatorState.RESTORING and self._restore is not None:
            # a failure before the restore ended: a task that keeps crashing loops here, and
            # counts as a checkpoint that failed would (status says FAILING at the limit)
            verdict = self.failures.failed(self._restore.checkpoint_id or 0, f"restore interrupted: {reason}")
            if verdict.tripped:
                out.append(CheckpointsFailing(verdict.consecutive, self.failures.reasons))
        if data_lost and self._committing is not None:
            self._ruled_out[self._committing.checkpoint_id] = f"in-flight data was lost while it committed: {reason}"
        if self._state is CoordinatorState.CHECKPOINTING:
            out += self._abort(f"failure: {reason}")
        if tasks is not None:
            if not tasks:
                raise ValueError("checkpoint coordinator: a topology needs at least one task, found none")
            self._tasks = dict(tasks)
        target = self._completed[-1] if self._completed else None
        out += self._begin_restore(now, target, f"failure: {reason}")
        return out

    def replan(self, now: float, tasks: Mapping[int, str], reason: str) -> list[CoordinatorAction]:
        """A live rescale switched the physical plan to ``tasks``: they are the ones counted from
        now on, and every one restores the newest completed checkpoint under the new plan (a
        resized component's tasks each load their share of its state), as after a failure. Before
        the first restore (starting) the tasks only change; while the operator decides, nothing
        restores (the operator's restore will, onto the new tasks)."""
        if not tasks:
            raise ValueError("checkpoint coordinator: a topology needs at least one task, found none")
        self._tasks = dict(tasks)
        if self._state is CoordinatorState.STARTING:
            return []
        if self._state is CoordinatorState.WAITING_FOR_OPERATOR:
            return [Ignored(f"rescale ({reason}) while waiting for the operator: {self._failure}")]
        out: list[CoordinatorAction] = []
        if self._in_flight is not None:
            # taken under the old plan and not complete: given up, not a failure of the storage
            # or of a task (the failure count stays)
            out.append(CheckpointAborted(self._in_flight.checkpoint_id, f"rescale: {reason}"))
            self._in_flight = None
        target = self._completed[-1] if self._completed else None
        return out + self._begin_restore(now, target, f"rescale: {reason}")

    def on_task_restored(self, restore_id: int, task_id: int, ok: bool, now: float,
                         error: str = "") -> list[CoordinatorAction]:
        """A task dropped its in-flight data and loaded the restore's checkpoint (``ok``), or could not."""
        r = self._restore
        if r is None or r.restore_id != restore_id:
            current = "none" if r is None else str(r.restore_id)
            return [Ignored(f"task {task_id} restored for restore {restore_id}: not under way (under way {current})")]
        if task_id not in self._tasks:
            return [Ignored(f"task {task_id} restored for restore {restore_id}: not a task of the plan")]
        if r.retry_at is not None:
            return [Ignored(f"task {task_id} restored for restore {restore_id}: a retry is already scheduled")]
        if not ok:
            if r.checkpoint_id is not None and is_transient_load_error(error):
                return self._retry(now, task_id, error)
            return self._fall_back(now, task_id, error)
        r.waiting.discard(task_id)
        if r.waiting:
            return []
        self._restore = None
        self._loaded = r.checkpoint_id
        self._state = CoordinatorState.IDLE
        self._next_due = now + self.config.interval_secs
        return [StartProcessing(r.restore_id, r.checkpoint_id)]

    def operator_restore(self, now: float, checkpoint_id: int | None) -> list[CoordinatorAction]:
        """``heron-py restore NAME --checkpoint ID | --clean``: the operator's decision, in any
        state but before the first start. The caller checked that the storage holds ``checkpoint_id``
        as complete. Checkpoints newer than the choice (or all, for a clean start) stop being
        targets: the operator rolled the topology back past them."""
        if self._state is CoordinatorState.STARTING:
            return [Ignored("operator restore before every task is ready: the first restore has not begun")]
        what = "a clean start" if checkpoint_id is None else f"checkpoint {checkpoint_id}"
        out: list[CoordinatorAction] = []
        if self._committing is not None and (checkpoint_id is None or self._committing.checkpoint_id > checkpoint_id):
            # its marker may still land: the operator rolled back past it
            self._ruled_out[self._committing.checkpoint_id] = f"the operator restored {what}"
        if self._state is CoordinatorState.CHECKPOINTING:
            assert self._in_flight is not None
            cid = self._in_flight.checkpoint_id
            self._in_flight = None
            out.append(CheckpointAborted(cid, f"the operator restores {what}"))
        if checkpoint_id is None:
            self._completed = []
        else:
            self._completed = sorted({c for c in self._completed if c < checkpoint_id} | {checkpoint_id})
        self._failure = None
        out += self._begin_restore(now, checkpoint_id, f"operator: heron-py restore ({what})")
        return out

    def status(self) -> CheckpointStatus:
        last, flight, r = self._last, self._in_flight, self._restore
        last_id = self._completed[-1] if self._completed else None
        known = last is not None and last.checkpoint_id == last_id
        in_progress = flight.checkpoint_id if flight is not None else (
            self._committing.checkpoint_id if self._committing is not None else None)
        return CheckpointStatus(
            state=self._state, in_progress_id=in_progress,
            in_progress_saved=(len(flight.saved) if flight is not None else
                               len(self._tasks) if self._committing is not None else 0),
            tasks=len(self._tasks), last_completed_id=last_id,
            last_completed_at=last.completed_at if known and last else None,
            last_duration_secs=last.duration_secs if known and last else None,
            last_size_bytes=last.size_bytes if known and last else None,
            components=last.per_component() if known and last else (),
            restore_checkpoint_id=None if r is None else r.checkpoint_id,
            failure=self._failure, consecutive_failures=self.failures.consecutive, failing=self.failures.failing,
            failure_reasons=self.failures.reasons, restore_attempt=0 if r is None else r.attempt,
            restore_error=None if r is None else r.error, loaded_id=self._loaded)

    # --- internals ---
    def _protected(self) -> tuple[int, ...]:
        """Never collected: the kept targets, what the running tasks restored from (a restore
        after a fallback may run on an older checkpoint than the kept ones) and what a restore
        under way is loading (a marker that lands meanwhile may push it out of the kept ones)."""
        loading = None if self._restore is None else self._restore.checkpoint_id
        return tuple(sorted({*self._completed, *(c for c in (self._loaded, loading) if c is not None)}))

    def _abort(self, reason: str) -> list[CoordinatorAction]:
        assert self._in_flight is not None
        cid = self._in_flight.checkpoint_id
        self._in_flight = None
        self._state = CoordinatorState.IDLE
        return self._failed(cid, reason)

    def _failed(self, checkpoint_id: int, reason: str) -> list[CoordinatorAction]:
        out: list[CoordinatorAction] = [CheckpointAborted(checkpoint_id, reason)]
        verdict = self.failures.failed(checkpoint_id, reason)
        if verdict.tripped:
            out.append(CheckpointsFailing(verdict.consecutive, self.failures.reasons))
        return out

    def _begin_restore(self, now: float, checkpoint_id: int | None, reason: str, *, attempt: int = 0,
                       error: str | None = None) -> list[CoordinatorAction]:
        # a new restore id for every attempt, so a late answer to an older attempt is ignored
        self._restore_ids += 1
        self._restore = _Restore(self._restore_ids, checkpoint_id, now, set(self._tasks), attempt, None, error)
        self._state = CoordinatorState.RESTORING
        return [StartRestore(self._restore_ids, checkpoint_id, reason)]

    def _retry(self, now: float, task_id: int, error: str) -> list[CoordinatorAction]:
        """A transient error: the same checkpoint again after a backoff; the list is untouched,
        so a blip never costs a checkpoint (and never leads to a clean start)."""
        r = self._restore
        assert r is not None
        r.attempt += 1
        r.error = f"task {task_id}: {error}"
        delay = backoff_secs(r.attempt, self.config.retry_initial_secs, self.config.retry_max_secs)
        r.retry_at = now + delay
        return [RestoreRetry(r.restore_id, r.checkpoint_id, r.attempt, delay, r.error)]

    def _fall_back(self, now: float, task_id: int, error: str) -> list[CoordinatorAction]:
        assert self._restore is not None
        failed = self._restore.checkpoint_id
        why = f"task {task_id} could not restore {'a clean start' if failed is None else f'checkpoint {failed}'}"
        why += f": {error}" if error else ""
        if failed is not None:
            # only the unusable checkpoint leaves the list: a newer one (a marker that landed
            # during the restore) stays a target; each fallback removes one, so this ends
            self._completed = [c for c in self._completed if c != failed]
            if self._completed:
                target = self._completed[-1]
                return self._begin_restore(now, target, f"{why}; falling back to checkpoint {target}")
        # never a clean start on our own: that would drop the topology's state for good
        self._restore = None
        self._state = CoordinatorState.WAITING_FOR_OPERATOR
        self._failure = (f"{why}; no other checkpoint to fall back to: waiting for the operator "
                         f"(heron-py restore NAME --checkpoint ID | --clean)")
        return [RestoreFailed(self._failure)]
