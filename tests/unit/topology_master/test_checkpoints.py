"""The topology master's checkpoint driver (issue 37) on a real event loop, real storage (a full
tmpfs where the test can mount one) and its real I/O thread; the stream managers are replaced by
the list of frames it sends. The harness is shared with test_checkpoint_ids.py."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from heron_py.checkpoint.coordinator import CoordinatorConfig
from heron_py.checkpoint.storage import CheckpointStorage, LocalFsStorage, Marker
from heron_py.common.framing import HEADER, MsgType
from heron_py.common.wire import decode
from proto import heron_py_pb2 as pb
from tests.support import mark_saved
from topology_master.checkpoints import CheckpointDriver, driver_metrics, driver_status

TASKS = {1: "spout", 2: "bolt"}
TOPOLOGY = "wc"


class Harness:
    def __init__(self, storage: CheckpointStorage, *, epoch: int, config: CoordinatorConfig | None = None,
                 **kw: Any) -> None:
        self.sent: list[bytes] = []
        self.driver = CheckpointDriver(TOPOLOGY, TASKS, config or CoordinatorConfig(interval_secs=0.05),
                                       storage, epoch=epoch, send_all=self.sent.append,
                                       log=logging.getLogger("test.checkpoints"), **kw)
        self.stopped = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.task = asyncio.create_task(self.driver.run(self.stopped, period_s=0.01))
        await until(lambda: self.driver.coordinator is not None)
        self.driver.on_instances({t: {"pid": 100 + t, "ready": True} for t in TASKS})

    async def driver_ticks(self, n: int) -> None:
        """Lets the driver's loop tick about ``n`` times (its period is 0.01 s here)."""
        for _ in range(n):
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self.stopped.set()
        if self.task is not None:
            await self.task

    def frames(self, msg_type: int) -> list[Any]:
        out: list[Any] = []
        for f in self.sent:
            _, t = HEADER.unpack_from(f)
            if t == msg_type:
                out.append(decode(t, f, "the driver"))
        return out

    def restored(self, restore_id: int, ok: bool = True, error: str = "") -> None:
        for t in TASKS:
            self.driver.on_report(pb.StateRestored(restore_id=restore_id, task_id=t, ok=ok, error=error))

    def saved(self, checkpoint_id: int, tasks: tuple[int, ...] = tuple(TASKS), stateless: tuple[int, ...] = ()) -> None:
        for t in tasks:
            self.driver.on_report(pb.CheckpointSaved(checkpoint_id=checkpoint_id, task_id=t, size_bytes=10,
                                                    duration_secs=0.001, stored=t not in stateless))

    async def processing(self) -> int:
        """Answers the newest restore for every task; returns its wire id once processing starts."""
        await until(lambda: bool(self.frames(MsgType.RESTORE_STATE)))
        rid = int(self.frames(MsgType.RESTORE_STATE)[-1].restore_id)
        self.restored(rid)
        await until(lambda: any(p.restore_id == rid for p in self.frames(MsgType.START_PROCESSING)))
        return rid

    async def next_checkpoint(self, after: int = 0) -> int:
        await until(lambda: any(s.checkpoint_id > after for s in self.frames(MsgType.START_CHECKPOINT)))
        return int(max(s.checkpoint_id for s in self.frames(MsgType.START_CHECKPOINT)))


async def until(cond: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met in {timeout}s")
        await asyncio.sleep(0.005)


# --- the tests ---

class ThreadRecordingStorage(LocalFsStorage):
    """Real storage that notes the thread of each call (to prove none runs on the event loop)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.threads: dict[str, set[int]] = {}

    def _note(self, what: str) -> None:
        self.threads.setdefault(what, set()).add(threading.get_ident())

    def completed_ids(self, topology: str) -> list[int]:
        self._note("completed_ids")
        return super().completed_ids(topology)

    def checkpoint_ids(self, topology: str) -> list[int]:
        self._note("checkpoint_ids")
        return super().checkpoint_ids(topology)

    def mark_complete(self, topology: str, checkpoint_id: int, stored: Iterable[int],
                      packing: Mapping[str, Sequence[int]]) -> None:
        self._note("mark_complete")
        super().mark_complete(topology, checkpoint_id, stored, packing)

    def gc(self, topology: str, keep_last: int = 2, protect: Iterable[int] = ()) -> list[int]:
        self._note("gc")
        return super().gc(topology, keep_last, protect)


def save_files(storage: CheckpointStorage, cid: int) -> None:
    """What the instances do before they report a save."""
    for t in TASKS:
        storage.save(TOPOLOGY, cid, t, b"state %d" % t)


async def test_checkpoint_io_runs_off_the_event_loop(tmp_path: Path) -> None:
    storage = ThreadRecordingStorage(tmp_path)
    h = Harness(storage, epoch=1)
    await h.start()
    await h.processing()
    done: list[int] = []
    for _ in range(3):  # keep 2: the third completion collects the first
        cid = await h.next_checkpoint(done[-1] if done else 0)
        save_files(storage, cid)
        h.saved(cid)
        await until(lambda cid=cid: driver_status(h.driver)["last_completed_id"] == cid)  # type: ignore[misc]
        done.append(cid)
    await until(lambda: "gc" in storage.threads and len(os.listdir(tmp_path / TOPOLOGY)) == 2)
    await h.stop()
    threads = {what: set(ids) for what, ids in storage.threads.items()}
    loop_thread = threading.get_ident()
    assert set(threads) == {"completed_ids", "checkpoint_ids", "mark_complete", "gc"}
    assert all(loop_thread not in ids for ids in threads.values()), threads
    assert storage.completed_ids(TOPOLOGY) == done[1:]


async def test_the_marker_names_the_tasks_that_reported_state_and_the_packing(tmp_path: Path) -> None:
    """The master writes what it counted: a stray file in the folder is not listed, a stateless
    task is not listed, and the plan's packing is recorded for the restore's check."""
    storage = LocalFsStorage(tmp_path)
    h = Harness(storage, epoch=1)
    await h.start()
    await h.processing()
    cid = await h.next_checkpoint()
    storage.save(TOPOLOGY, cid, 2, b"state 2")
    storage.save(TOPOLOGY, cid, 7, b"stray")  # no task 7 in the plan
    h.saved(cid, stateless=(1,))
    await until(lambda: driver_status(h.driver)["last_completed_id"] == cid)
    await h.stop()
    assert storage.marker(TOPOLOGY, cid) == Marker(frozenset({2}), {"spout": (1,), "bolt": (2,)})
    assert storage.load(TOPOLOGY, cid, 7) is None


async def test_the_old_master_stops_completing_once_its_session_is_lost(tmp_path: Path) -> None:
    session = {"up": True}
    storage = LocalFsStorage(tmp_path)
    h = Harness(storage, epoch=1, session_ok=lambda: session["up"])
    await h.start()
    await h.processing()
    cid = await h.next_checkpoint()
    save_files(storage, cid)
    h.saved(cid, (1,))
    session["up"] = False  # the ZooKeeper session is gone: a standby may be taking over
    h.saved(cid, (2,))
    starts = len(h.frames(MsgType.START_CHECKPOINT))
    await asyncio.sleep(0.2)
    await h.stop()
    assert storage.completed_ids(TOPOLOGY) == []
    assert len(h.frames(MsgType.START_CHECKPOINT)) == starts  # and starts no new one


async def test_a_master_whose_epoch_is_no_longer_the_newest_writes_no_marker(tmp_path: Path) -> None:
    """The check runs on the I/O thread right before the marker: a save report that was already
    queued when the standby took over does not complete the checkpoint."""
    newest = {"epoch": 1}
    storage = LocalFsStorage(tmp_path)
    h = Harness(storage, epoch=1, epoch_now=lambda: newest["epoch"])
    await h.start()
    await h.processing()
    cid = await h.next_checkpoint()
    save_files(storage, cid)
    newest["epoch"] = 2
    h.saved(cid)
    await until(lambda: h.driver.superseded is not None)
    await asyncio.sleep(0.1)
    await h.stop()
    assert storage.completed_ids(TOPOLOGY) == []
    assert h.driver.superseded == "a newer master took over (epoch 2, ours 1)"
    assert driver_status(h.driver)["last_completed_id"] is None
    assert h.driver.operator_restore(None) == (False, "topology 'wc': this master may not restore (a newer "
                                                      "master took over (epoch 2, ours 1))")


@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A real 256 KiB tmpfs (root only): a checkpoint folder that fills up."""
    mnt = tmp_path / "ckpt"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to mount a small tmpfs")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(folder: Path) -> Path:
    """Fills the file system to the last byte (and inode-free space for a marker's temp file)."""
    filler = folder / ".filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


async def test_a_full_checkpoint_folder_fails_the_marker_and_the_id_is_not_complete(small_tmpfs: Path,
                                                                                   caplog: Any) -> None:
    """Hole 3 (ENOSPC on mark_complete was only logged, the id counted complete) and hole 5
    (after max consecutive failures, status, the metric and the log say so), on a real full tmpfs."""
    storage = LocalFsStorage(small_tmpfs)
    h = Harness(storage, epoch=1, config=CoordinatorConfig(interval_secs=0.05, max_consecutive_failures=2))
    await h.start()
    await h.processing()
    first = await h.next_checkpoint()
    save_files(storage, first)
    h.saved(first)
    await until(lambda: driver_status(h.driver)["last_completed_id"] == first)
    cids: list[int] = []
    filler: Path | None = None
    for _ in range(2):
        cid = await h.next_checkpoint(cids[-1] if cids else first)
        if filler is not None:
            filler.unlink()  # the tasks' saves got their space; the marker does not
        save_files(storage, cid)
        filler = fill(small_tmpfs)
        h.saved(cid)
        await until(lambda cid=cid: driver_status(h.driver)["consecutive_failures"] == len(cids) + 1)  # type: ignore[misc]
        cids.append(cid)
    s = driver_status(h.driver)
    assert (s["last_completed_id"], s["failing"], s["consecutive_failures"]) == (first, True, 2)
    assert storage.completed_ids(TOPOLOGY) == [first]  # no marker, so no restore target
    assert driver_metrics(h.driver)["__checkpoint-failing"] == 1
    assert [r.split(": ", 1)[0] for r in s["failure_reasons"]] == [f"checkpoint {c}" for c in cids]
    assert all("No space left on device" in r for r in s["failure_reasons"])
    assert any("2 checkpoints failed in a row" in r.getMessage() and "No space left on device" in r.getMessage()
               for r in caplog.records)
    # a failure now restores the last durable checkpoint, not the unmarked ones
    h.driver.on_instances({1: {"pid": 999, "ready": True}, 2: {"pid": 102, "ready": True}}, "test")
    assert h.frames(MsgType.RESTORE_STATE)[-1].checkpoint_id == first
    assert filler is not None
    filler.unlink()  # space again: the next checkpoint completes and the state says so
    await h.processing()
    cid = await h.next_checkpoint(cids[-1])
    save_files(storage, cid)
    h.saved(cid)
    await until(lambda: driver_status(h.driver)["last_completed_id"] == cid)
    await h.stop()
    assert (driver_status(h.driver)["failing"], driver_metrics(h.driver)["__checkpoint-failing"]) == (False, 0)


async def test_waiting_for_the_operator_then_the_operator_restores(tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path)
    for cid in (5, 6):
        save_files(storage, cid)
        mark_saved(storage, TOPOLOGY, cid)
    (tmp_path / TOPOLOGY / "6" / "1").write_bytes(b"rot")  # corrupt
    (tmp_path / TOPOLOGY / "5" / "2").write_bytes(b"rot")
    seen: list[str] = []  # the execution state the page reads is written at each change
    holder: list[Harness] = []
    h = Harness(storage, epoch=3, state_changed=lambda: seen.append(driver_status(holder[0].driver)["state"]))
    holder.append(h)
    await h.start()
    await until(lambda: bool(h.frames(MsgType.RESTORE_STATE)))
    assert h.frames(MsgType.RESTORE_STATE)[-1].checkpoint_id == 6
    h.restored(int(h.frames(MsgType.RESTORE_STATE)[-1].restore_id), ok=False, error="CorruptCheckpointError: x")
    assert h.frames(MsgType.RESTORE_STATE)[-1].checkpoint_id == 5
    h.restored(int(h.frames(MsgType.RESTORE_STATE)[-1].restore_id), ok=False, error="CorruptCheckpointError: y")
    s = driver_status(h.driver)
    assert (s["state"], s["waiting_for_operator"]) == ("waiting for the operator", True)
    assert len(h.frames(MsgType.RESTORE_STATE)) == 2  # no clean start on its own
    assert seen[-1] == "waiting for the operator"
    assert h.driver.operator_restore(7) == (False, "topology 'wc': checkpoint 7 is not complete in the storage; "
                                                   "expected one of [5, 6] or --clean")
    assert h.driver.operator_restore(None) == (True, "topology 'wc': restoring a clean start (every task's "
                                                     "state is dropped)")
    assert h.frames(MsgType.RESTORE_STATE)[-1].checkpoint_id == 0
    await h.processing()
    assert driver_status(h.driver)["state"] in ("idle", "checkpointing")
    await h.stop()


async def test_a_session_lost_while_the_marker_is_queued_writes_no_marker_and_a_session_back_resumes(
        tmp_path: Path) -> None:
    session = {"up": True}
    storage = LocalFsStorage(tmp_path)
    io = concurrent.futures.ThreadPoolExecutor(1)
    h = Harness(storage, epoch=1, session_ok=lambda: session["up"], io=io)
    await h.start()
    await h.processing()
    cid = await h.next_checkpoint()
    save_files(storage, cid)
    gate = threading.Event()
    io.submit(gate.wait)  # the I/O thread is busy (a slow fsync): the marker waits behind it
    h.saved(cid)
    session["up"] = False
    gate.set()
    await until(lambda: driver_status(h.driver)["consecutive_failures"] == 1)
    assert storage.completed_ids(TOPOLOGY) == []
    assert driver_status(h.driver)["failure_reasons"] == [
        f"checkpoint {cid}: every task saved, but its complete marker could not be written: SessionLost: this "
        f"master lost its state-manager session"]
    session["up"] = True  # the same session came back: this master is still the active one
    nxt = await h.next_checkpoint(cid)
    save_files(storage, nxt)
    h.saved(nxt)
    await until(lambda: driver_status(h.driver)["last_completed_id"] == nxt)
    await h.stop()
    io.shutdown()
    assert storage.completed_ids(TOPOLOGY) == [nxt]
