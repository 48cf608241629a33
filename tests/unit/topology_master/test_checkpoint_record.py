"""Never a silent clean start, and the operator's decision survives the master: the master
records the newest complete checkpoint and the operator's last choice in the state manager
(``checkpointrecords``); a storage that cannot show what was recorded (a folder not mounted, a
flushed Redis) makes the first restore wait for the operator, and a master taking over after
``heron-py restore --clean`` does not go back to the checkpoints the operator rolled back past."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from heron_py.checkpoint.coordinator import (
    CheckpointCoordinator,
    CoordinatorConfig,
    CoordinatorState,
    RestoreFailed,
    StartRestore,
)
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import MsgType
from heron_py.state.localfs import LocalFsStateManager
from tests.unit.topology_master.test_checkpoints import TASKS, TOPOLOGY, Harness, save_files, until
from topology_master.checkpoint_store import StateRecords
from topology_master.checkpoints import driver_metrics, driver_status

WAITING = ("checkpoint 5 completed (the state manager recorded it), but the checkpoint storage shows {}: is it "
           "the storage the topology used, mounted and whole? Waiting for the operator (heron-py restore NAME "
           "--checkpoint ID | --clean)")


def test_a_storage_behind_the_record_waits_for_the_operator() -> None:
    cfg = CoordinatorConfig(interval_secs=1.0)
    empty = CheckpointCoordinator(cfg, TASKS, completed=[], recorded=5)
    assert empty.start(0.0) == [RestoreFailed(WAITING.format("no complete checkpoint"))]
    assert empty.state is CoordinatorState.WAITING_FOR_OPERATOR
    older = CheckpointCoordinator(cfg, TASKS, completed=[3], recorded=5)
    assert older.start(0.0) == [RestoreFailed(WAITING.format("checkpoint 3 as the newest complete one"))]
    whole = CheckpointCoordinator(cfg, TASKS, completed=[4, 5], recorded=5)
    assert whole.start(0.0) == [StartRestore(1, 5, "topology start")]
    first_run = CheckpointCoordinator(cfg, TASKS, completed=[], recorded=0)
    assert first_run.start(0.0) == [StartRestore(1, None, "topology start")]


class Records:
    def __init__(self, record: dict[str, Any] | None = None) -> None:
        self.record = record
        self.saves: list[dict[str, Any]] = []

    def load(self) -> dict[str, Any] | None:
        return self.record

    def save(self, record: dict[str, Any]) -> None:
        self.record = record
        self.saves.append(record)


async def test_a_completed_checkpoint_is_recorded_and_an_emptied_storage_waits(tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path / "ckpt")
    records = Records()
    h = Harness(storage, epoch=1, records=records)
    await h.start()
    await h.processing()
    cid = await h.next_checkpoint()
    save_files(storage, cid)
    h.saved(cid)
    await until(lambda: records.record == {"completed": cid})
    await h.stop()
    storage.delete_topology(TOPOLOGY)  # the folder the next master sees is empty (not mounted)
    h2 = Harness(storage, epoch=2, records=records)
    await h2.start()
    await until(lambda: driver_status(h2.driver)["waiting_for_operator"])
    assert h2.frames(MsgType.RESTORE_STATE) == []  # no clean start on its own
    assert driver_status(h2.driver)["failure"].startswith(f"checkpoint {cid} completed (the state manager recorded it)")
    assert driver_metrics(h2.driver)["__checkpoint-waiting-for-operator"] == 1
    ok, _ = h2.driver.operator_restore(None)  # the operator decides: a clean start
    assert ok
    await until(lambda: bool(h2.frames(MsgType.RESTORE_STATE)))
    assert h2.frames(MsgType.RESTORE_STATE)[-1].checkpoint_id == 0
    await h2.stop()


async def test_the_operators_clean_start_survives_a_failover(tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path / "ckpt")
    records = Records()
    h = Harness(storage, epoch=1, records=records)
    await h.start()
    await h.processing()
    cid = await h.next_checkpoint()
    save_files(storage, cid)
    h.saved(cid)
    await until(lambda: records.record == {"completed": cid})
    ok, _ = h.driver.operator_restore(None)
    assert ok
    await until(lambda: records.record is not None and "operator" in records.record)
    assert records.record == {"completed": 0, "operator": {"checkpoint": 0, "below": records.record["operator"]
                                                           ["below"]}}
    assert records.record["operator"]["below"] >= cid
    await h.stop()
    assert cid in storage.completed_ids(TOPOLOGY)  # still in the storage
    h2 = Harness(storage, epoch=2, records=records)  # a master takes over
    await h2.start()
    await until(lambda: bool(h2.frames(MsgType.RESTORE_STATE)))
    assert h2.frames(MsgType.RESTORE_STATE)[-1].checkpoint_id == 0  # the operator's choice, not checkpoint cid
    await h2.stop()


async def test_a_checkpoint_committing_at_the_operators_clean_start_does_not_come_back(tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path / "ckpt")
    records = Records()
    h = Harness(storage, epoch=1, records=records)
    await h.start()
    await h.processing()
    cid = await h.next_checkpoint()
    save_files(storage, cid)
    h.saved(cid)  # committing: its marker is being written
    ok, _ = h.driver.operator_restore(None)
    assert ok
    await until(lambda: cid not in storage.completed_ids(TOPOLOGY))  # its marker landed, then it was removed
    coord = h.driver.coordinator
    assert coord is not None and cid not in coord.completed
    await h.stop()


def test_the_record_is_kept_in_the_state_manager_through_a_kill(tmp_path: Path) -> None:
    state = LocalFsStateManager(tmp_path)
    StateRecords(state, "wc").save({"completed": 9})
    state.delete_topology("wc")  # a kill: the checkpoints stay, and so does what describes them
    assert StateRecords(state, "wc").load() == {"completed": 9}
    assert StateRecords(state, "other").load() is None
