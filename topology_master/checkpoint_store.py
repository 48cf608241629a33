"""The master's book of completed checkpoints, as Flink keeps a completed-checkpoint store beside
its coordinator: which ids the storage holds complete, the durable record of the newest one and
of the operator's last choice, and the storage calls that change them (a marker, a gc, a
discard, the record), each run by the ``StorageWorker`` (topology_master/checkpoint_io.py) off
the event loop, its outcome applied back here on the loop.

It decides nothing: the coordinator (heron_py/checkpoint/coordinator.py) chooses what to mark,
keep and discard, and the driver (topology_master/checkpoints.py) passes those choices on. What it
keeps is what the driver needs without I/O on the event loop: the ids an operator may restore."""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from heron_py.checkpoint.coordinator import CompletedCheckpoint
from topology_master.checkpoint_io import StorageWorker

# what the store hands back once the storage is listed: the complete ids that may still be
# restored, every id the storage holds, and the newest complete id the durable record names
Opened = tuple[list[int], list[int], int]


class StateRecords:
    """``CheckpointRecords`` in the state manager (they outlive a kill, as the checkpoints do)."""

    def __init__(self, state: Any, topology: str) -> None:
        self._state = state
        self._topology = topology

    def load(self) -> dict[str, Any] | None:
        record: dict[str, Any] | None = self._state.get_checkpoint_record(self._topology)
        return record

    def save(self, record: dict[str, Any]) -> None:
        self._state.set_checkpoint_record(self._topology, record)


def ruled_out_by_operator(record: Mapping[str, Any], checkpoint_id: int) -> bool:
    """Whether the operator's last choice rolled the topology back past ``checkpoint_id``."""
    op = record.get("operator")
    if not isinstance(op, Mapping):
        return False
    return int(op.get("checkpoint", 0)) < checkpoint_id <= int(op.get("below", 0))


class CompletedCheckpoints:
    def __init__(self, worker: StorageWorker, *, keep_completed: int, log: logging.Logger) -> None:
        """``keep_completed``: how many complete checkpoints a gc keeps (besides the protected)."""
        self._worker = worker
        self._keep = keep_completed
        self._log = log
        self.complete: set[int] = set()  # the storage's complete ids as last listed, less those ruled out
        self._record: dict[str, Any] = {}  # the durable record, as last read or written

    @property
    def storage_error(self) -> str | None:
        return self._worker.storage_error

    async def opened(self) -> Opened | None:
        """The storage listed and the record read (retried until they are, or None once closed)."""
        listed = await self._worker.listing()
        if listed is None:
            return None
        completed, ids, record = listed
        self._record = dict(record)
        # checkpoints the operator rolled back past stay no targets, whichever master reads them
        completed = [c for c in completed if not ruled_out_by_operator(record, c)]
        self.complete = set(completed)
        return completed, ids, int(record.get("completed", 0))

    def close(self) -> None:
        self._worker.close()

    def mark(self, cp: CompletedCheckpoint, then: Callable[[BaseException | None], None]) -> None:
        """Writes ``cp``'s complete marker; ``then`` gets the error (None once it is durable)."""
        def marked(f: concurrent.futures.Future[None]) -> None:
            error = f.exception()
            if error is None:
                self.complete.add(cp.checkpoint_id)
            then(error)
        self._worker.submit(functools.partial(self._worker.mark, cp.checkpoint_id, cp.stored, cp.packing), marked)

    def committed(self, checkpoint_id: int) -> None:
        """The record names the newest committed checkpoint (never an older one: ids only grow)."""
        if checkpoint_id > int(self._record.get("completed", 0)):
            self._save_record(completed=checkpoint_id)

    def collect(self, protect: tuple[int, ...]) -> None:
        """Removes the complete checkpoints past the newest kept, except ``protect``."""
        self._worker.submit(functools.partial(self._worker.gc, self._keep, protect), self._collected)

    def discard(self, checkpoint_id: int) -> None:
        self.complete.discard(checkpoint_id)
        self._worker.discard(checkpoint_id)

    def operator_chose(self, checkpoint_id: int | None, issued_up_to: int) -> None:
        """``heron-py restore``'s choice (None: a clean start), durable before the restore's
        commands go, so that a master taking over keeps it: every id issued up to now and above
        the choice is no target any more."""
        self._save_record(completed=checkpoint_id or 0,
                          operator={"checkpoint": checkpoint_id or 0, "below": issued_up_to})
        self.complete = {x for x in self.complete if not ruled_out_by_operator(self._record, x)}

    def _save_record(self, **changes: Any) -> None:
        """The durable record, changed and written on the I/O thread (in order with the rest)."""
        self._record = {**self._record, **changes}
        self._worker.save_record(dict(self._record))

    # event loop, with gc's outcome
    def _collected(self, f: concurrent.futures.Future[tuple[list[int], list[int]]]) -> None:
        error = f.exception()
        if error is not None:  # the old checkpoints stay; the next gc tries again
            self._log.warning("effectively once: garbage collection of old checkpoints failed: %s", error)
            return
        removed, complete = f.result()
        # the storage still holds what the operator rolled back past: never a choice again
        self.complete = {c for c in complete if not ruled_out_by_operator(self._record, c)}
        if removed:
            self._log.info("effectively once: removed old checkpoints %s", removed)
