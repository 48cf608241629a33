"""The master's checkpoint I/O worker (topology_master/checkpoint_io.py), what the mutation run
found untested: the listing's retries and the line each one logs, the one I/O thread (calls in
order, found by its name), close() (returns at once, drops what is queued, leaves a given
executor alone, no traceback for the dropped calls), the warnings of a failed background write,
and gc's protected checkpoint."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import topology_master.checkpoint_io as checkpoint_io
from heron_py.checkpoint.storage import LocalFsStorage
from tests.support import mark_saved
from topology_master.checkpoint_io import StorageWorker

LOGGER = "test.checkpoint_io"
STALE = OSError(errno.ESTALE, os.strerror(errno.ESTALE))


class ConnectionLoss(Exception):
    """As the state manager's client raises when its session is down."""


class Records:
    """The durable record: ``load`` fails ``load_failures`` times, ``save`` fails while ``save_error``."""

    def __init__(self, load_failures: int = 0, save_error: Exception | None = None) -> None:
        self.load_failures = load_failures
        self.save_error = save_error
        self.saved: list[dict[str, Any]] = []

    def load(self) -> dict[str, Any] | None:
        if self.load_failures:
            self.load_failures -= 1
            raise ConnectionLoss("session down")
        return None

    def save(self, record: dict[str, Any]) -> None:
        if self.save_error is not None:
            raise self.save_error
        self.saved.append(record)


class FlakyStorage(LocalFsStorage):
    """Its listing fails ``failures`` times (a stale NFS handle); remembers the worker's
    ``storage_error`` as it was at each listing, what status showed meanwhile."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.failures = 0
        self.worker: StorageWorker | None = None
        self.errors_seen: list[str | None] = []

    def completed_ids(self, topology: str) -> list[int]:
        if self.worker is not None:
            self.errors_seen.append(self.worker.storage_error)
        if self.failures:
            self.failures -= 1
            raise STALE
        return super().completed_ids(topology)


def _storage(tmp_path: Path) -> LocalFsStorage:
    s = LocalFsStorage(tmp_path / "ckpt")
    for cid in (1, 2, 3):
        s.save("wc", cid, 0, b"x")
        mark_saved(s, "wc", cid)
    return s


def _worker(storage: LocalFsStorage, records: Records | None = None, **kw: Any) -> StorageWorker:
    return StorageWorker("wc", storage, records, logging.getLogger(LOGGER), epoch=1, **kw)


async def _drained(w: StorageWorker) -> None:
    """Every earlier call and its callback on the loop are done: one thread runs them in order
    and call_soon_threadsafe keeps their callbacks in that order."""
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    w.submit(lambda: None, lambda f: done.set_result(None))
    await asyncio.wait_for(done, 5)


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER]


async def test_the_listing_is_retried_with_backoff_and_says_why(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # the real 1 s doubling to 30 s, scaled down: 0.01 s doubling to 0.02 s
    monkeypatch.setattr(checkpoint_io, "LIST_RETRY_INITIAL_S", 0.01)
    monkeypatch.setattr(checkpoint_io, "LIST_RETRY_MAX_S", 0.02)
    caplog.set_level(logging.INFO, logger=LOGGER)
    storage = FlakyStorage(tmp_path / "ckpt")
    storage.save("wc", 4, 0, b"x")
    mark_saved(storage, "wc", 4)
    storage.failures = 2
    w = _worker(storage, Records(load_failures=1))
    storage.worker = w
    assert w.storage_error is None  # status shows null, not "", before anything failed
    try:
        listed = await asyncio.wait_for(w.listing(), 5)
    finally:
        w.close()
    assert listed == ([4], [4], {})
    first = "cannot read the checkpoint record in the state manager: ConnectionLoss: session down; retry 1 in 0.01s"
    second = f"cannot list the checkpoints: {STALE}; retry 2 in 0.02s"
    third = f"cannot list the checkpoints: {STALE}; retry 3 in 0.02s"
    assert _lines(caplog) == [(logging.ERROR, f"effectively once: {m}") for m in (first, second, third)]
    # while it retries, status shows the last error; once listed, nothing
    assert storage.errors_seen == [first, second, third]
    assert w.storage_error is None
    # a hung storage call is found by its thread's name in a stack dump or a log line
    assert all((r.threadName or "").startswith("checkpoint-io") for r in caplog.records if r.name == LOGGER)


async def test_one_io_thread_runs_the_calls_in_order(tmp_path: Path) -> None:
    w = _worker(_storage(tmp_path))
    await w.listing()
    second_started = threading.Event()
    order: list[str] = []

    def first() -> None:
        # a second thread would start the next call meanwhile (a mark racing a gc)
        overlapped = second_started.wait(0.3)
        order.append(f"first (overlapped: {overlapped})")

    def second() -> None:
        second_started.set()
        order.append("second")

    w.submit(first, lambda f: None)
    w.submit(second, lambda f: None)
    await _drained(w)
    w.close()
    assert order == ["first (overlapped: False)", "second"]


async def test_close_returns_at_once_and_drops_what_is_queued(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    records = Records()
    storage = _storage(tmp_path)
    w = _worker(storage, records)
    await w.listing()
    started, release = threading.Event(), threading.Event()
    io_thread: list[threading.Thread] = []
    ran: list[str] = []

    def stuck() -> None:  # a storage call hung on a dead NFS server
        io_thread.append(threading.current_thread())
        started.set()
        release.wait(3)

    w.submit(stuck, lambda f: None)
    w.submit(lambda: ran.append("queued call"), lambda f: ran.append("its callback"))
    w.save_record({"completed": 3})
    w.discard(3)
    assert started.wait(5)
    t0 = time.monotonic()
    w.close()
    elapsed = time.monotonic() - t0
    release.set()
    io_thread[0].join(3)
    await asyncio.sleep(0.05)  # the dropped calls' callbacks, if any, run now
    assert elapsed < 1.0, "close() waited for the hung storage call"
    assert not io_thread[0].is_alive()
    assert (ran, records.saved) == ([], [])
    assert storage.completed_ids("wc") == [1, 2, 3]  # the queued discard never ran
    # a dropped call is no error: no "Exception in callback ... CancelledError" traceback
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_close_leaves_a_given_executor_running(tmp_path: Path) -> None:
    io = concurrent.futures.ThreadPoolExecutor(1)
    w = _worker(_storage(tmp_path), io=io)
    await w.listing()
    w.close()
    assert io.submit(lambda: "still running").result(5) == "still running"  # the master's, not the worker's
    io.shutdown()


def test_storage_io_before_the_listing_is_refused(tmp_path: Path) -> None:
    w = _worker(_storage(tmp_path))
    with pytest.raises(RuntimeError) as e:
        w.submit(lambda: None, lambda f: None)
    assert str(e.value) == "checkpoint driver: storage I/O before run() started the driver"
    w.close()


async def test_a_failed_record_write_or_discard_is_one_warning(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    session = {"ok": True}
    records = Records()
    storage = _storage(tmp_path)
    w = _worker(storage, records, session_ok=lambda: session["ok"])
    await w.listing()
    w.save_record({"completed": 3})
    w.discard(1)
    await _drained(w)
    assert records.saved == [{"completed": 3}]
    assert storage.completed_ids("wc") == [2, 3]
    assert _lines(caplog) == []  # a success says nothing
    records.save_error = ConnectionLoss("session down")
    session["ok"] = False
    w.save_record({"completed": 4})
    w.discard(2)
    await _drained(w)
    w.close()
    assert _lines(caplog) == [
        (logging.WARNING, "effectively once: the checkpoint record could not be written to the state manager "
                          "(the next completed checkpoint writes it again): session down"),
        (logging.WARNING, "effectively once: a discarded checkpoint could not be removed from the storage: "
                          "this master lost its state-manager session"),
    ]
    assert storage.completed_ids("wc") == [2, 3]  # a master without its session removes nothing


def test_gc_keeps_the_protected_checkpoint(tmp_path: Path) -> None:
    # the checkpoint the running tasks restored from (or one a restore is loading) stays
    w = _worker(_storage(tmp_path))
    assert w.gc(1, (1,)) == ([2], [1, 3])
    w.close()
