"""Per-role routes (heron_py/common/net.py Routes): a message a peer's role may not send to
a server is refused generically, on a real socket to a real stream manager: counted
(``__bad-frames/role``), one log line, and the connection closed; what the role may send
still goes through."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.common.framing import MsgType, encode_batch_frame
from heron_py.common.net import BaseHandler, Connection, Routes, connect, on, on_raw, relay
from heron_py.state.localfs import LocalFsStateManager
from proto import heron_py_pb2 as pb
from stream_manager.main import StreamManager

SECRET = b"s" * 32


class _Spout(Spout):  # a topology for the master to serve; never run
    pass


class _Bolt(Bolt):
    pass
LOG = logging.getLogger("test-role-routes")


class _Closed(BaseHandler):
    def __init__(self) -> None:
        self.closed = asyncio.get_running_loop().create_future()

    def on_close(self, conn: Connection) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


async def _with_sm(tmp: Path, body: Callable[[StreamManager], Awaitable[None]]) -> None:
    sm = StreamManager(topology="t", container=0, secret=SECRET, state=LocalFsStateManager(tmp / "state"),
                       port_file=tmp / "c0" / "stmgr.port", log=logging.getLogger("stmgr[0]"))
    (tmp / "c0").mkdir()
    await sm.start()
    try:
        await body(sm)
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
        conn.send_msg(pb.BackPressure(container=1, start=True, cause="task 9"))
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


def test_routes_take_the_type_of_the_class_and_refuse_a_class_off_the_wire_at_start() -> None:
    # the type is the registry's for the class (as for a send): a class and a type cannot disagree
    assert on("stmgr", pb.BackPressure, lambda c, m: None).msg_type is MsgType.BACKPRESSURE
    assert relay("instance", pb.CheckpointSaved, lambda c, f: None).msg_type is MsgType.CHECKPOINT_SAVED
    with pytest.raises(TypeError, match=r"^route stmgr/InstanceInfo: not a wire message "):
        on("stmgr", pb.InstanceInfo, lambda c, m: None)


def test_routes_refuse_a_raw_route_of_a_message_or_a_type_routed_twice_at_start() -> None:
    with pytest.raises(TypeError, match=r"^route instance/BACKPRESSURE: not a raw message type; use on"):
        on_raw("instance", MsgType.BACKPRESSURE, lambda c, f: None)
    r = on_raw("instance", MsgType.TUPLE_BATCH, lambda c, f: None)
    with pytest.raises(ValueError, match=r"^routes of stmgr: instance/TUPLE_BATCH routed twice$"):
        Routes("stmgr", [r, r])
    assert set(Routes("stmgr", [r]).table("instance")) == {MsgType.TUPLE_BATCH}
    assert Routes("stmgr", [r]).table("metricsmgr") == {}


def test_the_master_refuses_a_cli_command_from_a_metrics_manager_and_answers_the_cli(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from heron_py.api.topology import TopologyBuilder
    from heron_py.planner.packing import round_robin
    from topology_master.main import TopologyMaster

    b = TopologyBuilder("t")
    b.add_bolt("b", _Bolt, par=1, inputs=[b.add_spout("s", _Spout, par=1)])
    topo = b.build()
    state = LocalFsStateManager(tmp_path / "state")
    state.set_topology(topo, SECRET)
    state.set_packing_plan("t", round_robin(topo, 1))

    class _Answer(BaseHandler):
        def __init__(self) -> None:
            self.got = asyncio.get_running_loop().create_future()

        def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
            if not self.got.done():
                self.got.set_result(msg_type)

    async def body() -> None:
        tm = TopologyMaster(topology="t", secret=SECRET, state=state, log=logging.getLogger("tmanager"),
                            home=tmp_path / "home")
        await tm.start()
        try:
            admin = pb.AdminRequest(command="status").SerializeToString()
            from heron_py.common.framing import encode_frame

            with caplog.at_level(logging.WARNING, logger="tmanager"):
                closed = _Closed()
                conn = await connect("127.0.0.1", tm.port, closed, SECRET, role="metricsmgr", peer_id="0", log=LOG)
                conn.send(encode_frame(MsgType.ADMIN_REQUEST, admin))
                await asyncio.wait_for(closed.closed, 5)
            assert tm.counters.bad_frame_role == 1
            [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused ")]
            assert line.endswith("(role 'metricsmgr', id '0'): not a message a metricsmgr may send to the "
                                 "tmanager; closing the connection")
            answer = _Answer()
            cli = await connect("127.0.0.1", tm.port, answer, SECRET, role="cli", peer_id="cli", log=LOG)
            cli.send(encode_frame(MsgType.ADMIN_REQUEST, admin))
            assert await asyncio.wait_for(answer.got, 5) == MsgType.ADMIN_RESPONSE
            assert tm.counters.bad_frame_role == 1
            cli.close()
        finally:
            tm.stop()

    asyncio.run(body())
