"""A stream manager that registers again mid-checkpoint (its link to the master was cut while
the checkpoint started) gets the checkpoint's start: without it its spouts never start it, and
the checkpoint waits out its whole timeout (60 s by default) while the exact sinks' staged
writes grow in every task's state (seen by the fault checker: a half-open master link, then
the checkpoint folder full of staged rows)."""

from __future__ import annotations

from pathlib import Path

from heron_py.checkpoint.coordinator import CoordinatorConfig
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import HEADER, MsgType
from heron_py.common.handshake import PeerIdentity
from heron_py.common.wire import decode
from tests.fakes import FakeConn
from tests.unit.topology_master.test_checkpoints import Harness, save_files, until
from topology_master.checkpoints import driver_status


def _types(conn: FakeConn) -> list[tuple[int, object]]:
    out = []
    for f in conn.sent:
        _, t = HEADER.unpack_from(f)
        out.append((t, decode(t, f, "test")))
    return out


async def test_a_stream_manager_back_mid_checkpoint_gets_its_start_and_the_checkpoint_completes(
        tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path)
    # checkpoints 0.3 s apart: the greeting below usually falls between two
    h = Harness(storage, epoch=1, config=CoordinatorConfig(interval_secs=0.3))
    await h.start()
    await h.processing()
    cid = await h.next_checkpoint()
    back = FakeConn(PeerIdentity("stmgr", "1"))
    h.driver.greet(back)
    [(kind, msg)] = _types(back)
    assert kind == MsgType.START_CHECKPOINT and msg.checkpoint_id == cid
    save_files(storage, cid)
    h.saved(cid)
    await until(lambda: driver_status(h.driver)["last_completed_id"] == cid)
    # the next checkpoint starts an interval after this one: a test process starved of the CPU
    # can get here after that, and then the greeting must catch the stream manager up on it
    in_progress = driver_status(h.driver)["in_progress_id"]
    idle = FakeConn(PeerIdentity("stmgr", "1"))
    h.driver.greet(idle)  # no await in between: the driver's state is the one just read
    await h.stop()
    if in_progress is None:  # between checkpoints: nothing to catch up on
        assert idle.sent == []
    else:
        [(kind, msg)] = _types(idle)
        assert kind == MsgType.START_CHECKPOINT and msg.checkpoint_id > cid
