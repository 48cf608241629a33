"""Effectively once to the end: a sink whose writes leave the engine only with a complete
checkpoint, and exactly once (Flink's write-ahead sink shape, with Flink's CheckpointListener
as the trigger; ours).

Under EFFECTIVELY_ONCE a sink does not write an input when it comes. ``CheckpointCommits``
keeps the inputs that arrived since the last barrier (``open``); at a barrier (the component's
``pre_save(N)``) they become checkpoint N's batch, *staged*, and the staged batches are part of
the task's saved state. When the master says N is complete (``on_checkpoint_complete(N)``),
every staged batch up to N is committed, oldest first, through the sink's ``commit(id, items)``.
A commit must be idempotent per checkpoint id: the sink keeps its own durable progress, the
newest id it committed for this task, and writes a batch and moves that progress in one atomic
step (one PostgreSQL transaction, one Redis MULTI/EXEC, one rename of a file named after the
id), skipping a batch at or below the progress.

Why this is exact through any failure:
- a batch is committed only once its checkpoint is complete, so a rollback never has to undo a
  write: what was staged after the restored checkpoint is gone with the run that staged it, and
  the replayed inputs are staged again;
- a batch staged before the restored checkpoint K is in K's state: the restore commits it (the
  notification may have been lost, or the task killed between the notification and its commit),
  and the progress makes a second commit of it write nothing;
- a commit that fails (the server down) is retried, never dropped: the batch stays staged, and
  in every later checkpoint's state, until a commit of it succeeds.

Pure logic: no I/O, no clock; the sinks (PostgreSQL, Redis, files) bring ``commit``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# the key of a sink's staged batches in its task's state (a name users' keys do not take)
STATE_KEY = "__heron_py_staged__"


@dataclass(frozen=True)
class StagedInput:
    """An input as a sink stages it: what its mapper reads of a tuple (where it came from, its
    values, its id for log lines), small and picklable, so it travels in the task's state."""

    component: str
    stream: str
    values: tuple[Any, ...]
    id: str

    @classmethod
    def of(cls, tup: Any) -> StagedInput:
        return cls(tup.component, tup.stream, tuple(tup.values), str(tup.id))


@dataclass
class CheckpointCommits(Generic[T]):
    open: list[T] = field(default_factory=list)  # since the last barrier
    staged: list[tuple[int, list[T]]] = field(default_factory=list)  # (checkpoint id, items), oldest first

    def add(self, item: T) -> None:
        self.open.append(item)

    def barrier(self, checkpoint_id: int) -> list[tuple[int, list[T]]]:
        """Checkpoint ``checkpoint_id``'s barrier: what came since the last one is its batch;
        returns what the task's state must hold (every batch not committed yet)."""
        if self.open:
            if self.staged and checkpoint_id <= self.staged[-1][0]:
                raise ValueError(f"checkpoint commits: barrier {checkpoint_id} after barrier "
                                 f"{self.staged[-1][0]}; expected increasing ids")
            self.staged.append((checkpoint_id, self.open))
            self.open = []
        return list(self.staged)

    def restored(self, staged: Any) -> None:
        """The restored checkpoint's staged batches (every one at or below it: to commit);
        whatever the rolled-back run had open or staged is gone with it."""
        self.open = []
        self.staged = [(int(cid), list(items)) for cid, items in (staged or [])]

    def due(self, complete_id: int) -> list[tuple[int, list[T]]]:
        """The staged batches to commit now: those up to the newest complete ``complete_id``."""
        return [(c, items) for c, items in self.staged if c <= complete_id]

    def committed(self, checkpoint_id: int) -> None:
        """The batch of ``checkpoint_id`` is durable in the sink's system (or was already)."""
        self.staged = [(c, items) for c, items in self.staged if c != checkpoint_id]

    @property
    def pending(self) -> int:
        """Inputs not yet committed (open or staged)."""
        return len(self.open) + sum(len(items) for _c, items in self.staged)


class Committer(Generic[T]):
    """Drives a sink's commits: what is due after a notification or a restore, in order, each
    through ``commit``; the first failure stops the round (a later batch must not overtake it)
    and is retried at the next ``retry`` call the sink makes once its backoff has passed."""

    def __init__(self, commits: CheckpointCommits[T], commit: Callable[[int, list[T]], None],
                 failed: Callable[[int, Exception], None]) -> None:
        self.commits = commits
        self._commit = commit
        self._failed = failed
        self.complete_id = 0  # the newest checkpoint known complete: batches up to it may be committed

    def on_complete(self, checkpoint_id: int) -> None:
        self.complete_id = max(self.complete_id, checkpoint_id)
        self.run()

    def on_restored(self, staged: Any) -> None:
        """The restored checkpoint is complete, and every batch its state holds is at or below
        it: all of them are due (the new run's batches have higher ids, due only at their own
        notification)."""
        self.commits.restored(staged)
        self.complete_id = max((c for c, _items in self.commits.staged), default=0)

    def run(self) -> bool:
        """Commits what is due; False when a commit failed (retry later)."""
        for cid, items in self.commits.due(self.complete_id):
            try:
                self._commit(cid, items)
            except Exception as e:  # the sink's system refused or is down: kept, retried
                self._failed(cid, e)
                return False
            self.commits.committed(cid)
        return True

    @property
    def due(self) -> bool:
        return bool(self.commits.due(self.complete_id))


class CommittingSink:
    """What an effectively-once sink bolt adds (PostgresInsertBolt, FileSink): heronpy's
    StatefulComponent hooks keep its staged batches in the task's state, the master's word
    commits them, and its ``heron_poll`` retries a failed commit once the backoff has passed.
    The bolt makes ``committer`` in its ``initialize`` (``start_commits``), and has ``conn``
    (its ``Reconnect``) and ``clock``."""
    # staged writes are committed by the task that staged them: split over another parallelism,
    # a batch would be committed twice or never (heron_py/runtime/rescale.py)
    heron_state_rescale = "refuse"

    committer: Committer[Any]  # what a sink stages: StagedInput, or its own plain arguments
    conn: Any
    clock: Callable[[], float]
    _restored: Any = None
    _state: Any = None

    def init_state(self, state: Any) -> None:
        """Before ``initialize``: the restored checkpoint's staged batches, due at once."""
        self._state = state
        self._restored = state.get(STATE_KEY) or []

    def pre_save(self, checkpoint_id: Any) -> None:
        self._state.put(STATE_KEY, self.committer.commits.barrier(int(checkpoint_id)))

    def on_checkpoint_complete(self, checkpoint_id: int) -> None:
        self.committer.complete_id = max(self.committer.complete_id, checkpoint_id)
        self.commit_due()

    def start_commits(self, commit: Callable[[int, list[Any]], None],
                      failed: Callable[[int, Exception], None]) -> None:
        self.committer = Committer(CheckpointCommits(), commit, failed)
        if self._restored is not None:
            self.committer.on_restored(self._restored)

    def commit_due(self) -> None:
        if self.committer.due and self.conn.ready(self.clock()):
            self.committer.run()
