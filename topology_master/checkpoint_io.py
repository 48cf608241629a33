"""The master's checkpoint I/O, one job apart from the driver's decisions
(topology_master/checkpoints.py): every call to the checkpoint storage and to the durable
checkpoint record runs in order on one thread, off the event loop, and its outcome comes back to
the loop. Before a checkpoint's complete marker is written, the fence checks that this master
still holds its state-manager session and is the newest epoch: an old master must never complete
a checkpoint."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from heron_py.checkpoint.failures import backoff_secs
from heron_py.checkpoint.storage import CheckpointStorage

# listing the storage at start: retried after 1, 2, 4 ... 30 s (an NFS mount that is back)
LIST_RETRY_INITIAL_S = 1.0
LIST_RETRY_MAX_S = 30.0

T = TypeVar("T")


class SessionLost(Exception):
    """The state-manager session is down: this master cannot know it is still the active one.
    The checkpoint fails; the driver goes on if the session comes back."""


class Superseded(Exception):
    """A master with a newer epoch is active: this one never drives checkpoints again."""


class CheckpointRecords(Protocol):
    """Where the master keeps what it knows durably of the checkpoints (the state manager's
    ``checkpointrecords``): ``{"completed": N, "operator": {"checkpoint": ID, "below": M}}``,
    the newest complete checkpoint, and the operator's last choice (ID, 0 for a clean start)
    with every id up to M issued when it was made (those above ID are no targets any more)."""

    def load(self) -> dict[str, Any] | None: ...
    def save(self, record: dict[str, Any]) -> None: ...


Listing = tuple[list[int], list[int], dict[str, Any]]  # complete ids, every id, the record


class StorageWorker:
    def __init__(self, topology: str, storage: CheckpointStorage, records: CheckpointRecords | None,
                 log: logging.Logger, *, epoch: int, io: concurrent.futures.Executor | None = None,
                 session_ok: Callable[[], bool] = lambda: True, epoch_now: Callable[[], int] | None = None) -> None:
        self.topology = topology
        self._storage = storage
        self._records = records
        self._log = log
        self._epoch = epoch
        self._session_ok = session_ok
        self._epoch_now = epoch_now
        self._own_io = io is None
        self._io = io or concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="checkpoint-io")
        self._closed = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.storage_error: str | None = None  # the listing's last error while it is retried

    async def listing(self) -> Listing | None:
        """The storage's ids and the durable record, read on the I/O thread (retried until they
        can be read, or None once closed); binds the worker to the running loop."""
        self._loop = asyncio.get_running_loop()
        listed = await asyncio.wrap_future(self._io.submit(self._list_until_ok))
        if listed is not None:
            self.storage_error = None
        return listed

    def close(self) -> None:
        self._closed.set()
        if self._own_io:
            self._io.shutdown(wait=False, cancel_futures=True)

    def submit(self, fn: Callable[[], T], then: Callable[[concurrent.futures.Future[T]], None]) -> None:
        """Runs ``fn`` on the I/O thread; ``then`` gets its future back on the event loop."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("checkpoint driver: storage I/O before run() started the driver")
        fut = self._io.submit(fn)

        def back(f: concurrent.futures.Future[T]) -> None:
            if f.cancelled():  # close() dropped it: the driver is stopping, nobody waits for it
                return
            try:
                loop.call_soon_threadsafe(then, f)
            except RuntimeError:  # the loop closed: the master is gone
                pass

        fut.add_done_callback(back)

    def save_record(self, record: dict[str, Any]) -> None:
        if self._records is not None:
            self.submit(lambda: self._records.save(record) if self._records is not None else None,
                        self._logged("the checkpoint record could not be written to the state manager (the next "
                                     "completed checkpoint writes it again)"))

    def discard(self, checkpoint_id: int) -> None:
        def remove() -> None:
            self.fence()  # an old master removes nothing: the checkpoints are the new one's now
            self._storage.remove(self.topology, [checkpoint_id])
        self.submit(remove, self._logged("a discarded checkpoint could not be removed from the storage"))

    # I/O thread
    def _list_until_ok(self) -> Listing | None:
        """The complete ids, every id and the durable record; a storage that cannot be listed
        (or a record that cannot be read) is retried (a clean start because a mount was missing
        would lose the topology's state)."""
        attempt = 0
        while not self._closed.is_set():
            try:
                record = (self._records.load() if self._records is not None else None) or {}
            except Exception as e:  # the state manager's session is down: as an unreadable listing
                error = f"cannot read the checkpoint record in the state manager: {type(e).__name__}: {e}"
            else:
                try:
                    return (self._storage.completed_ids(self.topology), self._storage.checkpoint_ids(self.topology),
                            record)
                except (OSError, MemoryError) as e:
                    error = f"cannot list the checkpoints: {e}"
            attempt += 1
            delay = backoff_secs(attempt, LIST_RETRY_INITIAL_S, LIST_RETRY_MAX_S)
            self.storage_error = f"{error}; retry {attempt} in {delay:g}s"
            self._log.error("effectively once: %s", self.storage_error)
            self._closed.wait(delay)
        return None

    def fence(self) -> None:
        if not self._session_ok():
            raise SessionLost("this master lost its state-manager session")
        if self._epoch_now is not None:
            newest = self._epoch_now()
            if newest != self._epoch:
                raise Superseded(f"a newer master took over (epoch {newest}, ours {self._epoch})")

    def mark(self, checkpoint_id: int, stored: tuple[int, ...], packing: Mapping[str, tuple[int, ...]]) -> None:
        self.fence()  # right before the write: an old master must not complete a checkpoint
        self._storage.mark_complete(self.topology, checkpoint_id, stored, packing)

    def gc(self, keep_last: int, protect: tuple[int, ...]) -> tuple[list[int], list[int]]:
        self.fence()  # a zombie master's idea of what to keep is no longer the truth
        removed = self._storage.gc(self.topology, keep_last=keep_last, protect=protect)
        return removed, self._storage.completed_ids(self.topology)

    # event loop
    def _logged(self, what: str) -> Callable[[concurrent.futures.Future[None]], None]:
        def then(f: concurrent.futures.Future[None]) -> None:
            error = f.exception()
            if error is not None:
                self._log.warning("effectively once: %s: %s", what, error)
        return then
