"""The master's checkpoint driver as the operator and the stream managers meet it: what
``status()`` reports in each state (``heron-py status``, the HTTP API and the page read it), the
lines it logs, the answers to a stream manager's rollback request, what a task's report or the
instances' change does, and the operator's ``heron-py restore``. The driver runs on a real event
loop with real storage and its I/O thread, but on the test's clock: it ticks only when the test
calls ``tick()``, so every state and message is exact."""

from __future__ import annotations

import asyncio
import concurrent.futures
import errno
import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from heron_py.checkpoint.coordinator import CoordinatorConfig
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import MsgType
from heron_py.common.wire import decode
from proto import heron_py_pb2 as pb
from tests.support import mark_saved
from tests.unit.topology_master.test_checkpoint_record import Records
from tests.unit.topology_master.test_checkpoints import TOPOLOGY, Harness, save_files, until
from topology_master.checkpoints import driver_status

LOGGER = "test.checkpoints"  # the Harness's logger
# a long restore timeout and interval: nothing happens on its own between the test's ticks
CONFIG = CoordinatorConfig(interval_secs=10.0, timeout_secs=60.0, restore_timeout_secs=30.0,
                           max_consecutive_failures=2)
READY = {1: {"pid": 101, "ready": True}, 2: {"pid": 102, "ready": True}}
WALL = 1_700_000_123.5
RID1 = (1 << 32) | 1  # the first restore of a master with epoch 1, on the wire


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Rig(Harness):
    """The shared Harness, but the driver's clock and wall clock are the test's and its loop
    ticks once (right after the listing): the test calls ``tick()`` itself."""

    def __init__(self, storage: LocalFsStorage, *, epoch: int = 1, **kw: Any) -> None:
        self.clock = FakeClock(100.0)
        self.wall = FakeClock(WALL)
        super().__init__(storage, epoch=epoch, config=CONFIG, clock=self.clock, wall=self.wall, **kw)

    async def open(self) -> None:
        """The storage listed, no task reported yet."""
        self.task = asyncio.create_task(self.driver.run(self.stopped, period_s=3600))
        await until(lambda: self.driver.coordinator is not None)

    async def start(self) -> None:
        await self.open()
        self.driver.on_instances(READY)

    def tick(self, advance: float = 0.0) -> None:
        self.clock.now += advance
        self.driver.tick()

    def restores(self) -> list[tuple[int, int, str]]:
        return [(int(r.restore_id), int(r.checkpoint_id), str(r.reason)) for r in self.frames(MsgType.RESTORE_STATE)]

    def report_saved(self, cid: int, task: int) -> None:
        # distinct sizes and durations per component, so status's per-component figures are checked
        size, secs = {1: (100, 0.002), 2: (250, 0.004)}[task]
        self.driver.on_report(pb.CheckpointSaved(checkpoint_id=cid, task_id=task, size_bytes=size, duration_secs=secs,
                                                 stored=True))

    def checkpoint(self) -> int:
        """The next checkpoint, due one interval after the last one (or the restore)."""
        self.tick(CONFIG.interval_secs)
        return int(self.frames(MsgType.START_CHECKPOINT)[-1].checkpoint_id)


def stored(tmp_path: Path, *cids: int) -> LocalFsStorage:
    storage = LocalFsStorage(tmp_path)
    for cid in cids:
        save_files(storage, cid)
        mark_saved(storage, TOPOLOGY, cid)
    return storage


def logged(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def answer_of(frame: bytes) -> tuple[int, bool, str]:
    m = decode(MsgType.ROLLBACK_ANSWER, frame, "the driver")
    assert isinstance(m, pb.RollbackAnswer)
    return int(m.restore_id), bool(m.acted), str(m.reason)


def status_with(**fields: Any) -> dict[str, Any]:
    """status() of a listed driver with nothing under way, changed by ``fields``."""
    base: dict[str, Any] = {
        "state": "idle", "epoch": 1, "in_progress_id": None, "in_progress_saved": 0, "tasks": 2,
        "last_completed_id": None, "last_completed_time": None, "last_duration_secs": None,
        "last_size_bytes": None, "components": {}, "restore_checkpoint_id": None, "failure": None,
        "waiting_for_operator": False, "failing": False, "consecutive_failures": 0, "failure_reasons": [],
        "restore_attempt": 0, "restore_error": None, "loaded_checkpoint_id": None, "completed_ids": [],
        "superseded": None}
    assert set(fields) <= set(base), set(fields) - set(base)
    return {**base, **fields}


# --- before the storage is listed ---

class UnlistableStorage(LocalFsStorage):
    """A checkpoint folder whose mount is gone: listing fails until the test says otherwise."""

    def completed_ids(self, topology: str) -> list[int]:
        raise OSError(errno.EIO, "mount gone")


async def test_before_the_listing_status_operator_restore_and_rollback_requests_say_so(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    h = Rig(UnlistableStorage(tmp_path), epoch=3)
    d = h.driver
    # not run yet: the listing is in progress
    assert driver_status(d) == {"state": "starting", "epoch": 3, "storage_error": None, "failing": False,
                          "consecutive_failures": 0}
    assert d.operator_restore(None) == (False, "topology 'wc': the checkpoint storage is not listed yet (in "
                                               "progress); try again")
    answered: list[bytes] = []
    d.on_rollback_request(1, 7, "the connection to stream manager 0 closed", answered.append)
    assert answered == []  # kept until the storage is listed: the stream manager asks again meanwhile
    assert logged(caplog)[-1] == ("WARNING", "effectively once: stream manager 1 asked to roll back restore 7 (the "
                                             "connection to stream manager 0 closed) while this master cannot act "
                                             "(storage not listed yet); kept until it can")
    # a report that comes before the listing (a task of an earlier master's restore) is not counted
    d.on_report(pb.StateRestored(restore_id=(3 << 32) | 1, task_id=1, ok=True))
    d.on_report(pb.CheckpointSaved(checkpoint_id=5, task_id=1, failed=True, error="OSError: x"))
    h.task = asyncio.create_task(d.run(h.stopped, period_s=3600))
    await until(lambda: d.storage_error is not None)
    error = "cannot list the checkpoints: [Errno 5] mount gone; retry 1 in 1s"
    assert driver_status(d) == {"state": "starting", "epoch": 3, "storage_error": error, "failing": False,
                          "consecutive_failures": 0}
    assert d.operator_restore(5) == (False, f"topology 'wc': the checkpoint storage is not listed yet ({error}); "
                                            f"try again")
    # closed while the listing is retried: the driver does not open a storage it never listed
    # and its loop ends cleanly once stopped
    d.close()
    await asyncio.sleep(0.05)
    h.stopped.set()
    await asyncio.wait_for(h.task, 5)
    assert d.coordinator is None and h.sent == []


class GatedStorage(LocalFsStorage):
    """A slow listing (an NFS server that takes its time): it returns when the test opens the gate."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.gate = threading.Event()

    def completed_ids(self, topology: str) -> list[int]:
        self.gate.wait(5)
        return super().completed_ids(topology)


async def test_a_master_stopped_while_the_storage_is_listed_sends_no_restore(tmp_path: Path) -> None:
    """Stopped (it lost the election, or shuts down) while its listing was slow: the listing's
    late result must not start a restore from a master that no longer drives the topology."""
    storage = GatedStorage(tmp_path)
    h = Rig(storage)
    h.task = asyncio.create_task(h.driver.run(h.stopped, period_s=3600))
    h.driver.on_instances(READY)  # every task ready: a listed driver would restore at once
    await asyncio.sleep(0.02)
    h.stopped.set()
    storage.gate.set()
    await asyncio.wait_for(h.task, 5)
    assert h.sent == []
    assert driver_status(h.driver)["state"] == "starting" and h.driver.coordinator is None


# --- status() in each state ---

async def test_status_through_start_restore_checkpoint_commit_and_an_operator_restore(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    io = concurrent.futures.ThreadPoolExecutor(1)
    records = Records()
    storage = stored(tmp_path, 5, 6)
    h = Rig(storage, io=io, records=records)
    d = h.driver
    await h.open()
    d.on_instances({1: READY[1], 2: {"pid": 0, "ready": False}})  # task 2 not ready yet: no restore
    assert h.sent == []
    assert driver_status(d) == status_with(state="starting", last_completed_id=6, completed_ids=[5, 6])

    d.on_instances(READY)
    assert logged(caplog)[-2:] == [("INFO", "every task is ready: restoring before processing"),
                                   ("INFO", "restore 1 to checkpoint 6 (topology start)")]
    assert h.restores() == [(RID1, 6, "topology start")]
    assert driver_status(d) == status_with(state="restoring", last_completed_id=6, restore_checkpoint_id=6,
                                     completed_ids=[5, 6])
    # a transient error: the same checkpoint again after a backoff, and status says which try
    d.on_report(pb.StateRestored(restore_id=RID1, task_id=1, ok=False, error="OSError: [Errno 5] Input/output error"))
    assert driver_status(d) == status_with(state="restoring", last_completed_id=6, restore_checkpoint_id=6,
                                     restore_attempt=1, restore_error="task 1: OSError: [Errno 5] Input/output error",
                                     completed_ids=[5, 6])
    h.tick(1.0)
    rid = RID1 + 1
    assert h.restores()[-1] == (rid, 6, "retry 1 after a transient error: task 1: OSError: [Errno 5] Input/output "
                                     "error")
    h.restored(rid)
    # the newest complete checkpoint came from the storage: no time of this master for it
    assert driver_status(d) == status_with(last_completed_id=6, loaded_checkpoint_id=6, completed_ids=[5, 6])

    cid = h.checkpoint()
    assert driver_status(d) == status_with(state="checkpointing", in_progress_id=cid, last_completed_id=6,
                                     loaded_checkpoint_id=6, completed_ids=[5, 6])
    save_files(storage, cid)
    h.report_saved(cid, 1)
    assert driver_status(d)["in_progress_saved"] == 1
    gate = threading.Event()
    io.submit(gate.wait)  # the I/O thread is busy: the marker waits, the checkpoint is committing
    h.clock.now += 0.25
    h.report_saved(cid, 2)
    assert driver_status(d) == status_with(state="committing", in_progress_id=cid, in_progress_saved=2,
                                     last_completed_id=6, loaded_checkpoint_id=6, completed_ids=[5, 6])
    gate.set()
    await until(lambda: driver_status(d)["last_completed_id"] == cid)
    assert driver_status(d) == status_with(
        last_completed_id=cid, last_completed_time=WALL, last_duration_secs=0.25, last_size_bytes=350,
        components={"bolt": {"tasks": 1, "size_bytes": 250, "max_duration_secs": 0.004},
                    "spout": {"tasks": 1, "size_bytes": 100, "max_duration_secs": 0.002}},
        loaded_checkpoint_id=6, completed_ids=[6, cid])

    # the operator goes back to checkpoint 6: its time is not the time this master completed cid
    assert d.operator_restore(6) == (True, "topology 'wc': restoring checkpoint 6")
    assert h.restores()[-1] == (rid + 1, 6, "operator: heron-py restore (checkpoint 6)")
    assert driver_status(d) == status_with(state="restoring", last_completed_id=6, restore_checkpoint_id=6,
                                     loaded_checkpoint_id=6, completed_ids=[6])
    await until(lambda: bool(records.saves) and "operator" in records.saves[-1])
    assert records.saves[-1] == {"completed": 6, "operator": {"checkpoint": 6, "below": cid}}
    await h.stop()
    io.shutdown()


async def test_status_while_waiting_for_the_operator(tmp_path: Path) -> None:
    """The record says checkpoint 9 completed, the storage shows none: no clean start on its own;
    a restore of an id the storage does not hold is refused with what it holds (none)."""
    h = Rig(stored(tmp_path), records=Records({"completed": 9}))
    await h.start()
    failure = ("checkpoint 9 completed (the state manager recorded it), but the checkpoint storage shows no "
               "complete checkpoint: is it the storage the topology used, mounted and whole? Waiting for the "
               "operator (heron-py restore NAME --checkpoint ID | --clean)")
    assert driver_status(h.driver) == status_with(state="waiting for the operator", waiting_for_operator=True,
                                            failure=failure)
    assert h.driver.operator_restore(9) == (False, "topology 'wc': checkpoint 9 is not complete in the storage; "
                                                   "expected one of none or --clean")
    # a task restarting changes nothing while the operator decides
    h.driver.on_instances({1: {"pid": 555, "ready": True}, 2: READY[2]}, "heartbeat")
    assert h.restores() == []
    await h.stop()


async def test_status_and_log_when_saves_fail_in_a_row(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    h = Rig(stored(tmp_path))
    await h.start()
    h.restored(RID1)
    first = h.checkpoint()
    h.report_saved(first, 1)
    h.driver.on_report(pb.CheckpointSaved(checkpoint_id=first, task_id=2, failed=True,
                                          error="OSError: [Errno 28] No space left on device"))
    reason1 = f"checkpoint {first}: task 2 could not save its state: OSError: [Errno 28] No space left on device"
    assert logged(caplog)[-1] == ("WARNING", f"checkpoint {first} aborted: task 2 could not save its state: "
                                             f"OSError: [Errno 28] No space left on device")
    assert driver_status(h.driver) == status_with(consecutive_failures=1, failure_reasons=[reason1])
    second = h.checkpoint()
    h.driver.on_report(pb.CheckpointSaved(checkpoint_id=second, task_id=1, failed=True,
                                          error="OSError: [Errno 5] Input/output error"))
    reason2 = f"checkpoint {second}: task 1 could not save its state: OSError: [Errno 5] Input/output error"
    assert driver_status(h.driver) == status_with(failing=True, consecutive_failures=2,
                                                  failure_reasons=[reason1, reason2])
    assert logged(caplog)[-1] == ("ERROR", "effectively once: 2 checkpoints failed in a row "
                                           "(topology.stateful.max.consecutive.failures); the state is not being "
                                           f"saved: {reason1}; {reason2}")
    await h.stop()


async def test_status_of_a_master_that_was_superseded(tmp_path: Path) -> None:
    newest = {"epoch": 1}
    storage = stored(tmp_path)
    h = Rig(storage, epoch_now=lambda: newest["epoch"])
    await h.start()
    h.restored(RID1)
    cid = h.checkpoint()
    save_files(storage, cid)
    newest["epoch"] = 2  # a standby took over
    h.report_saved(cid, 1)
    h.report_saved(cid, 2)
    await until(lambda: h.driver.superseded is not None)
    why = "a newer master took over (epoch 2, ours 1)"
    assert driver_status(h.driver) == status_with(
        consecutive_failures=1, superseded=why,
        failure_reasons=[f"checkpoint {cid}: every task saved, but its complete marker could not be written: "
                         f"Superseded: {why}"])
    await h.stop()


# --- a task restarted or gone ---

async def test_a_task_restarted_or_gone_rolls_every_task_back_with_the_cause(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    h = Rig(stored(tmp_path, 5))
    await h.start()
    h.restored(RID1)
    # task 2's instance still reports its pid, but no longer ready: it is gone
    h.driver.on_instances({1: {"pid": 555, "ready": True}, 2: {"pid": 102, "ready": False}},
                          "stream manager 1 disconnected")
    why = "stream manager 1 disconnected: task 1 (pid 101) restarted, task 2 (pid 102) is gone"
    assert logged(caplog)[-2:] == [("WARNING", f"effectively once: {why}; rolling every task back"),
                                   ("INFO", f"restore 2 to checkpoint 5 (failure: {why})")]
    assert h.restores()[-1] == (RID1 + 1, 5, f"failure: {why}")
    # the restore began at the failure's time: it times out a restore timeout later
    h.tick(CONFIG.restore_timeout_secs)
    assert h.restores()[-1] == (RID1 + 2, 5, "restore 2 timed out after 30.0s waiting for tasks [1, 2]")
    # without a cause (the caller gave none), the line starts with the task
    h.driver.on_instances({1: {"pid": 556, "ready": True}, 2: {"pid": 0, "ready": False}})
    assert logged(caplog)[-2] == ("WARNING", "effectively once: task 1 (pid 555) restarted; rolling every task back")
    assert h.restores()[-1] == (RID1 + 3, 5, "failure: task 1 (pid 555) restarted")
    await h.stop()


async def test_only_a_change_of_the_tasks_rolls_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A report that changes nothing, a gone task reported gone again, or a gone task back with a
    new pid (the restore under way waits for it) rolls nothing back again."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    h = Rig(stored(tmp_path))
    await h.start()
    h.restored(RID1)
    h.driver.on_instances(READY, "heartbeat")
    assert len(h.restores()) == 1 and driver_status(h.driver)["state"] == "idle"
    gone = {1: READY[1], 2: {"pid": 0, "ready": False}}
    h.driver.on_instances(gone, "heartbeat")
    assert h.restores()[-1] == (RID1 + 1, 0, "failure: heartbeat: task 2 (pid 102) is gone")
    h.driver.on_instances(gone, "heartbeat")
    h.driver.on_instances({1: READY[1], 2: {"pid": 777, "ready": True}}, "heartbeat")
    assert len(h.restores()) == 2
    h.restored(RID1 + 1)
    assert driver_status(h.driver)["state"] == "idle"
    assert [m for lvl, m in logged(caplog) if lvl == "WARNING"] == [
        "effectively once: heartbeat: task 2 (pid 102) is gone; rolling every task back"]
    await h.stop()


async def test_tasks_restarted_while_the_master_could_not_act_roll_back_once_it_can(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    session = {"up": True}
    h = Rig(stored(tmp_path), session_ok=lambda: session["up"])
    await h.start()
    h.restored(RID1)
    session["up"] = False
    h.driver.on_instances({1: {"pid": 555, "ready": True}, 2: {"pid": 0, "ready": False}}, "heartbeat")
    h.driver.on_instances({1: {"pid": 556, "ready": True}, 2: {"pid": 0, "ready": False}})
    h.tick(1.0)
    assert len(h.restores()) == 1
    session["up"] = True
    h.tick()
    why = "heartbeat: task 1 (pid 101) restarted, task 2 (pid 102) is gone; task 1 (pid 555) restarted"
    assert logged(caplog)[-2:] == [
        ("WARNING", f"effectively once: while this master could not act: {why}; rolling every task back"),
        ("INFO", f"restore 2 to a clean start (failure: {why})")]
    await h.stop()


# --- a stream manager's rollback request ---

async def test_a_request_before_the_listing_is_answered_moot_once_listed_before_any_restore(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Kept while the storage was not listed; once listed, no restore has begun (a task is not
    ready): moot, and the stream manager is answered with why."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    h = Rig(stored(tmp_path))
    answered: list[bytes] = []
    h.driver.on_rollback_request(1, 7, "the connection to stream manager 0 closed", answered.append)
    await h.open()  # its first tick acts on what was kept
    assert [answer_of(a) for a in answered] == [(7, False, "restore 0, starting")]
    assert logged(caplog)[-1] == ("INFO", "effectively once: stream manager 1 asked to roll back restore 7 (the "
                                          "connection to stream manager 0 closed): moot (restore 0, starting)")
    await h.stop()


async def test_a_request_while_the_session_is_lost_is_kept_then_acted_on_and_answered(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    session = {"up": True}
    h = Rig(stored(tmp_path, 5), session_ok=lambda: session["up"])
    await h.start()
    h.restored(RID1)
    session["up"] = False
    answered: list[bytes] = []
    h.driver.on_rollback_request(2, RID1, "frames dropped (held-overflow)", answered.append)
    assert logged(caplog)[-1] == ("WARNING", f"effectively once: stream manager 2 asked to roll back restore {RID1} "
                                             f"(frames dropped (held-overflow)) while this master cannot act (its "
                                             f"state-manager session is lost); kept until it can")
    assert h.driver.operator_restore(5) == (False, "topology 'wc': this master may not restore (its state-manager "
                                                   "session is lost)")
    h.tick()
    assert answered == []
    session["up"] = True
    h.tick()
    why = "stream manager 2: frames dropped (held-overflow)"
    assert [answer_of(a) for a in answered] == [(RID1, True, why)]
    assert logged(caplog)[-2:] == [("WARNING", f"effectively once: {why}; rolling every task back"),
                                   ("INFO", f"restore 2 to checkpoint 5 (failure: {why})")]
    # asked again about the run it already rolled back: moot, with the current restore
    h.driver.on_rollback_request(2, RID1, "frames dropped (held-overflow)", answered.append)
    assert answer_of(answered[-1]) == (RID1, False, f"restore {RID1 + 1}, restoring")
    await h.stop()


# --- a task's report ---

async def test_reports_while_the_master_may_not_act_are_not_counted(tmp_path: Path) -> None:
    session = {"up": True}
    storage = stored(tmp_path)
    h = Rig(storage, session_ok=lambda: session["up"])
    await h.start()
    session["up"] = False
    h.restored(RID1)  # not counted: still restoring
    assert driver_status(h.driver)["state"] == "restoring"
    session["up"] = True
    h.restored(RID1)
    cid = h.checkpoint()
    h.report_saved(cid, 1)
    session["up"] = False
    h.report_saved(cid, 2)
    assert driver_status(h.driver) == status_with(state="checkpointing", in_progress_id=cid, in_progress_saved=1,
                                            loaded_checkpoint_id=None)
    await h.stop()


async def test_a_task_that_cannot_load_a_checkpoint_falls_back_and_its_error_is_kept(tmp_path: Path) -> None:
    h = Rig(stored(tmp_path, 5, 6))
    await h.start()
    h.driver.on_report(pb.StateRestored(restore_id=RID1, task_id=1, ok=False,
                                        error="CorruptCheckpointError: task 1 of checkpoint 6: bad digest"))
    assert h.restores()[-1] == (RID1 + 1, 5, "task 1 could not restore checkpoint 6: CorruptCheckpointError: task "
                                             "1 of checkpoint 6: bad digest; falling back to checkpoint 5")
    # a restore id of an older master (epoch 0) is not ours to count
    h.driver.on_report(pb.StateRestored(restore_id=2, task_id=1, ok=True))
    h.driver.on_report(pb.StateRestored(restore_id=2, task_id=2, ok=True))
    assert driver_status(h.driver)["state"] == "restoring"
    h.restored(RID1 + 1)
    assert driver_status(h.driver)["loaded_checkpoint_id"] == 5
    await h.stop()


# --- the operator's restore ---

async def test_an_operator_restore_before_every_task_is_ready_is_refused(tmp_path: Path) -> None:
    records = Records()
    h = Rig(stored(tmp_path, 5), records=records)
    await h.open()
    assert h.driver.operator_restore(5) == (False, "operator restore before every task is ready: the first "
                                                   "restore has not begun")
    assert h.driver.operator_restore(None) == (False, "operator restore before every task is ready: the first "
                                                      "restore has not begun")
    await h.driver_ticks(3)
    assert h.sent == [] and records.saves == []  # nothing sent, the operator's choice not recorded
    assert driver_status(h.driver)["state"] == "starting"
    await h.stop()


async def test_an_operator_restore_during_a_restore_replaces_it_and_rules_out_newer_checkpoints(
        tmp_path: Path) -> None:
    records = Records()
    h = Rig(stored(tmp_path, 5, 6), records=records)
    await h.start()
    assert driver_status(h.driver)["state"] == "restoring"
    assert h.driver.operator_restore(5) == (True, "topology 'wc': restoring checkpoint 5")
    assert h.restores()[-1] == (RID1 + 1, 5, "operator: heron-py restore (checkpoint 5)")
    await until(lambda: bool(records.saves))
    # every id this master could have handed out so far is past the choice
    assert records.saves == [{"completed": 5, "operator": {"checkpoint": 5, "below": 1 << 32}}]
    # checkpoint 6 is past the operator's choice: no target any more, as for a master taking over
    assert h.driver.operator_restore(6) == (False, "topology 'wc': checkpoint 6 is not complete in the storage; "
                                                   "expected one of [5] or --clean")
    # the operator's restore began at the operator's time: it times out a restore timeout later
    h.tick(CONFIG.restore_timeout_secs)
    assert h.restores()[-1] == (RID1 + 2, 5, "restore 2 timed out after 30.0s waiting for tasks [1, 2]")
    assert h.driver.operator_restore(5) == (True, "topology 'wc': restoring checkpoint 5")
    await h.stop()



async def test_a_discarded_checkpoint_does_not_change_the_time_status_shows_for_the_last_one(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Checkpoint B's marker lands after a stream manager reported lost data while B committed:
    B is discarded, A stays the last completed one, and status must still show A's time."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    io = concurrent.futures.ThreadPoolExecutor(1)
    storage = stored(tmp_path)
    h = Rig(storage, io=io)
    await h.start()
    h.restored(RID1)
    a = h.checkpoint()
    save_files(storage, a)
    h.report_saved(a, 1)
    h.report_saved(a, 2)
    await until(lambda: driver_status(h.driver)["last_completed_id"] == a)
    b = h.checkpoint()
    save_files(storage, b)
    gate = threading.Event()
    io.submit(gate.wait)  # B's marker waits behind a slow fsync
    h.report_saved(b, 1)
    h.report_saved(b, 2)
    h.driver.on_rollback_request(0, RID1, "frames dropped (held-overflow)")
    h.wall.now = WALL + 500
    gate.set()
    await until(lambda: any(m.startswith(f"checkpoint {b} discarded: ") for _, m in logged(caplog)))
    await until(lambda: b not in storage.completed_ids(TOPOLOGY))  # and removed from the storage
    s = driver_status(h.driver)
    await h.stop()
    io.shutdown()
    assert (s["last_completed_id"], s["last_completed_time"]) == (a, WALL)


async def test_gc_never_makes_a_checkpoint_the_operator_rolled_back_past_a_choice_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """--clean with 5 and 6 stored, then a new checkpoint commits and gc lists the storage (6
    is still in it): it stays ruled out here, as it is for a master taking over."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    storage = stored(tmp_path, 5, 6)
    h = Rig(storage)
    await h.start()
    h.restored(RID1)
    assert h.driver.operator_restore(None)[0]
    [(rid, cid, _)] = h.restores()[-1:]
    assert cid == 0
    h.restored(rid)
    c = h.checkpoint()
    save_files(storage, c)
    h.report_saved(c, 1)
    h.report_saved(c, 2)
    await until(lambda: driver_status(h.driver)["last_completed_id"] == c)
    await until(lambda: any(m == "effectively once: removed old checkpoints [5]" for _, m in logged(caplog)))
    ok, why = h.driver.operator_restore(6)
    await h.stop()
    assert not ok and why.startswith("topology 'wc': checkpoint 6 ")
