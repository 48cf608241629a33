"""A connector's batches emitted as one tuple tree each (``heron_emit_tracked_run``,
heron_py/api/contracts.py ``TrackedRunEmitSource``): a batch gets one message id, an int, and
keeps its records' own ids until its one outcome comes back; then the connector acks or fails
each record through its usual per-record bookkeeping (``ReplayableSource``), so commits, retries
and give-ups stay per record. A failed batch fails each of its records, and each is retried on
its own with its own id.

The engine then keeps one root, one tracker entry and one result per batch instead of one per
record (the Kafka spout has its own form of this in kafka/offsets.py, whose runs are already
per batch). Pure: no I/O, no clock."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class RunIds:
    """The batches in flight: a batch's int id → its records' ids, in emit order."""

    def __init__(self) -> None:
        self._runs: dict[int, list[Any]] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._runs)

    @staticmethod
    def is_run(tup_id: Any) -> bool:
        """Whether a message id is a batch's (the connectors' own record ids are never ints)."""
        return type(tup_id) is int

    def add(self, ids: list[Any]) -> int:
        """A new batch of records with these ids: its own id."""
        run = self._next
        self._next = run + 1
        self._runs[run] = ids
        return run

    def take(self, run: int) -> list[Any]:
        """The records' ids of a batch whose outcome came, forgotten here; none for a batch
        already resolved (a late or second outcome)."""
        return self._runs.pop(run, [])

    def expand(self, tup_ids: Iterable[Any]) -> list[Any]:
        """Acked message ids with every batch's id replaced by its records' ids, in order."""
        out: list[Any] = []
        runs = self._runs
        for t in tup_ids:
            if type(t) is int:
                out += runs.pop(t, ())
            else:
                out.append(t)
        return out
