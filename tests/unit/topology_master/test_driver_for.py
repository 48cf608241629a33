"""``driver_for``: the checkpoint driver the active master builds from a topology's config
(topology_master/main.py), with everything the master hands it: its epoch, its session and the
newest epoch, the page's state writer, the topology's checkpoint key and the durable record.
Each of them is seen doing its job in a run on a real event loop and real files."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import HEADER, MsgType
from heron_py.common.wire import decode
from heron_py.planner.model import PackingPlan, TaskPlacement, TopologyDef
from proto import heron_py_pb2 as pb
from tests.unit.topology_master.test_checkpoint_record import Records
from tests.unit.topology_master.test_checkpoints import until
from topology_master.checkpoints import CheckpointDriver, driver_for, driver_status, tick_forever

LOGGER = "test.driver_for"
PACKING = PackingPlan(2, (TaskPlacement(1, "spout", 0, 1), TaskPlacement(2, "bolt", 0, 2)))
READY = {1: {"pid": 101, "ready": True}, 2: {"pid": 102, "ready": True}}
EO = {"topology.reliability.mode": "EFFECTIVELY_ONCE", "topology.stateful.checkpoint.interval.seconds": 0.05}


def topology(config: dict[str, Any]) -> TopologyDef:
    return TopologyDef("wc", (), config)


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == LOGGER]


def frames(sent: list[bytes], msg_type: int) -> list[Any]:
    out: list[Any] = []
    for f in sent:
        _, t = HEADER.unpack_from(f)
        if t == msg_type:
            out.append(decode(t, f, "the driver"))
    return out


def test_only_an_effectively_once_topology_gets_a_driver(tmp_path: Path) -> None:
    log = logging.getLogger(LOGGER)
    for config in ({}, {"topology.reliability.mode": "ATLEAST_ONCE"}):
        assert driver_for("wc", topology(config), PACKING, tmp_path, send_all=lambda f: None, log=log, epoch=1) is None
    driver = driver_for("wc", topology(EO), PACKING, tmp_path, send_all=lambda f: None, log=log, epoch=1)
    assert isinstance(driver, CheckpointDriver)
    driver.close()


async def test_the_driver_of_an_effectively_once_topology(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    sent: list[bytes] = []
    records = Records()
    session = {"up": False}
    newest = {"epoch": 3}
    states: list[str] = []
    key = b"k" * 32
    driver = driver_for("wc", topology(EO), PACKING, tmp_path, send_all=sent.append, log=logging.getLogger(LOGGER),
                        epoch=3, session_ok=lambda: session["up"], epoch_now=lambda: newest["epoch"],
                        state_changed=lambda: states.append(driver_status(driver)["state"] if driver else "?"),
                        secret=key, records=records)
    assert driver is not None
    stopped = asyncio.Event()
    task = asyncio.create_task(tick_forever(driver, stopped, 0.01))
    await until(lambda: driver.coordinator is not None)
    driver.on_instances(READY)
    await asyncio.sleep(0.05)
    assert frames(sent, MsgType.RESTORE_STATE) == []  # its session is not up: this master may not act
    session["up"] = True
    await until(lambda: bool(frames(sent, MsgType.RESTORE_STATE)))
    rid = frames(sent, MsgType.RESTORE_STATE)[-1].restore_id
    assert rid == (3 << 32) | 1  # the restore id from the master's epoch
    for t in READY:
        driver.on_report(pb.StateRestored(restore_id=rid, task_id=t, ok=True))
    await until(lambda: bool(frames(sent, MsgType.START_CHECKPOINT)))
    cid = frames(sent, MsgType.START_CHECKPOINT)[0].checkpoint_id
    assert cid == (3 << 32) | 1
    for t in READY:  # stateless tasks: the marker needs no state file
        driver.on_report(pb.CheckpointSaved(checkpoint_id=cid, task_id=t, stored=False))
    await until(lambda: records.record == {"completed": cid})  # the durable record is the one handed in
    # under the home's checkpoints/ and signed under the topology's checkpoint key
    assert LocalFsStorage(tmp_path / "checkpoints", secret=key).completed_ids("wc") == [cid]
    newest["epoch"] = 4  # a standby took over: this master's next marker is refused
    await until(lambda: any(s.checkpoint_id > cid for s in frames(sent, MsgType.START_CHECKPOINT)))
    nxt = frames(sent, MsgType.START_CHECKPOINT)[-1].checkpoint_id
    for t in READY:
        driver.on_report(pb.CheckpointSaved(checkpoint_id=nxt, task_id=t, stored=False))
    await until(lambda: driver.superseded is not None)
    stopped.set()
    await task
    assert driver.superseded == "a newer master took over (epoch 4, ours 3)"
    assert states[:2] == ["restoring", "idle"]  # the page's state is written through the master's writer
    assert lines(caplog)[0] == ("INFO", f"effectively once: a checkpoint every 0.05s, kept in "
                                        f"{tmp_path / 'checkpoints'}")
    assert driver.operator_restore(None) == (False, "topology 'wc': this master may not restore (a newer master "
                                                    "took over (epoch 4, ours 3))")
