"""Per-role routes (heron_py/common/net.py Routes): a message a peer's role may not send to
a server is refused generically, on a real socket to a real stream manager: counted
(``__bad-frames/role``), one log line, and the connection closed; what the role may send
still goes through."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from heron_py.common.framing import MsgType, encode_batch_frame
from heron_py.common.net import BaseHandler, Connection, Routes, connect, on, on_raw
from heron_py.state.localfs import LocalFsStateManager
from proto import heron_py_pb2 as pb
from stream_manager.main import StreamManager

SECRET = b"s" * 32
LOG = logging.getLogger("test-role-routes")


class _Closed(BaseHandler):
    def __init__(self) -> None:
        self.closed = asyncio.get_running_loop().create_future()

    def on_close(self, conn: Connection) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def _with_sm(tmp: Path, body):  # type: ignore[no-untyped-def]
    sm = StreamManager(topology="t", container=0, secret=SECRET, state=LocalFsStateManager(tmp / "state"),
                       port_file=tmp / "c0" / "stmgr.port", log=logging.getLogger("stmgr[0]"))
    (tmp / "c0").mkdir()
    await sm.start()
    try:
        return await body(sm)
    finally:
        sm.stop()


async def _refused(sm: StreamManager, role: str, peer_id: str, frame: bytes) -> Connection:
    handler = _Closed()
    conn = await connect("127.0.0.1", sm.port, handler, SECRET, role=role, peer_id=peer_id, log=LOG)
    conn.send(frame)
    await asyncio.wait_for(handler.closed, 5)
    return conn


@pytest.mark.parametrize("role, peer_id, msg_type, frame", [
    ("instance", "3", "REGISTER_STMGR_REQUEST", pb.RegisterStmgrRequest(container=0).SerializeToString()),
    ("metricsmgr", "0", "TUPLE_BATCH", None),
    ("stmgr", "1", "REGISTER_INSTANCE_REQUEST", pb.RegisterInstanceRequest(task_id=1).SerializeToString()),
])
def test_a_message_the_role_may_not_send_is_refused_counted_and_closes_the_connection(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, role: str, peer_id: str, msg_type: str,
        frame: bytes | None) -> None:
    from heron_py.common.framing import encode_frame

    t = MsgType[msg_type]
    raw = encode_batch_frame(3, 3, b"x", count=1) if frame is None else encode_frame(t, frame)

    async def body(sm: StreamManager) -> None:
        with caplog.at_level(logging.WARNING, logger="stmgr[0]"):
            await _refused(sm, role, peer_id, raw)
        assert sm.counters.bad_frame_role == 1 and sm.counters.bad_frames == 1
        assert sm.metrics.report()["counters"]["__bad-frames/role"] == 1
        lines = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
        assert len(lines) == 1
        assert lines[0].startswith(f"refused {msg_type} from 127.0.0.1:")
        assert lines[0].endswith(f"(role {role!r}, id {peer_id!r}): not a message a {role} may send to the "
                                 f"stmgr; closing the connection")

    asyncio.run(_with_sm(tmp_path, body))


def test_a_message_the_role_may_send_goes_through(tmp_path: Path) -> None:
    async def body(sm: StreamManager) -> None:
        handler = _Closed()
        conn = await connect("127.0.0.1", sm.port, handler, SECRET, role="stmgr", peer_id="1", log=LOG)
        conn.send_msg(MsgType.BACKPRESSURE, pb.BackPressure(container=1, start=True, cause="task 9"))
        for _ in range(100):
            if 1 in sm.bp.peers:
                break
            await asyncio.sleep(0.01)
        assert 1 in sm.bp.peers and conn.is_open
        assert sm.counters.bad_frame_role == 0
        conn.close()

    asyncio.run(_with_sm(tmp_path, body))


def test_a_body_that_does_not_parse_closes_with_one_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from heron_py.common.framing import encode_frame

    async def body(sm: StreamManager) -> None:
        with caplog.at_level(logging.WARNING, logger="stmgr[0]"):
            await _refused(sm, "stmgr", "1", encode_frame(MsgType.BACKPRESSURE, b"\xff\xff\xff"))
        assert sm.counters.bad_frames == 1 and sm.counters.bad_frame_role == 0
        [line] = [r.getMessage() for r in caplog.records if "does not parse" in r.getMessage()]
        assert line.startswith("dropping connection: BACKPRESSURE frame from 127.0.0.1:")
        assert " does not parse as BackPressure (3 bytes): " in line

    asyncio.run(_with_sm(tmp_path, body))


def test_routes_refuse_a_wrong_class_or_a_type_routed_twice_at_start() -> None:
    with pytest.raises(TypeError, match=r"^route stmgr/BACKPRESSURE: the wire carries .*BackPressure.*, not "
                                        r"StmgrHello$"):
        on("stmgr", MsgType.BACKPRESSURE, pb.StmgrHello, lambda c, m: None)
    with pytest.raises(TypeError, match=r"^route instance/BACKPRESSURE: not a raw message type; use on"):
        on_raw("instance", MsgType.BACKPRESSURE, lambda c, f: None)
    r = on_raw("instance", MsgType.TUPLE_BATCH, lambda c, f: None)
    with pytest.raises(ValueError, match=r"^routes of stmgr: instance/TUPLE_BATCH routed twice$"):
        Routes("stmgr", [r, r])
    assert Routes("stmgr", [r]).allows("instance", MsgType.TUPLE_BATCH)
    assert not Routes("stmgr", [r]).allows("metricsmgr", MsgType.TUPLE_BATCH)
