"""Effectively once, the stream manager's own wiring of a loss (its parts are tested alone in
tests/unit/runtime/test_stateful.py): a counted drop or a closed data connection asks the
master to roll back, the request goes again with every heartbeat until answered, checkpoint
markers stop meanwhile, and a peer's second connection while its first is open is a loss."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest
from google.protobuf.message import Message

from heron_py.common.framing import MsgType, encode_batch_frame, encode_frame, encode_marker, frame_type
from heron_py.common.handshake import PeerIdentity
from heron_py.common.wire import decode_as, encode_msg
from heron_py.state.localfs import LocalFsStateManager
from proto import heron_py_pb2 as pb
from stream_manager.forwarder import DropReason
from stream_manager.instances import INSTANCE_SHARE
from stream_manager.main import StreamManager
from stream_manager.servers import Inbound
from tests.fakes import FakeConn, word_count_plan


class _MasterConn(FakeConn):
    """Records typed sends as whole frames, so requests and heartbeats can be told apart."""

    def send_msg(self, msg: Message) -> None:
        self.sent.append(encode_msg(msg))


@pytest.fixture
def sm(tmp_path: Path) -> StreamManager:
    sm = StreamManager(topology="wc", container=0, secret=b"s" * 32, state=LocalFsStateManager(tmp_path / "state"),
                       port_file=tmp_path / "stmgr.port", log=logging.getLogger("stmgr[0]"))
    sm.clique.set_plan = lambda plan: None  # type: ignore[method-assign]  # no peer connections here
    plan = word_count_plan()
    topo = dataclasses.replace(plan.topology, config={"topology.reliability.mode": "EFFECTIVELY_ONCE"})
    plan = dataclasses.replace(plan, topology=topo)
    sm.on_new_pplan(json.dumps(plan.to_dict()).encode())
    assert sm.effectively_once
    sm.master.channel.conn = _MasterConn(PeerIdentity("tmanager", ""))  # type: ignore[assignment]
    master = sm.ckpt.master_routes()
    restore = encode_frame(MsgType.RESTORE_STATE, pb.RestoreState(restore_id=7, checkpoint_id=0).SerializeToString())
    go = encode_frame(MsgType.START_PROCESSING, pb.StartProcessing(restore_id=7).SerializeToString())
    for route in master:
        if route.msg_type == MsgType.RESTORE_STATE:
            route.fn(sm.master.channel.conn, restore)
        elif route.msg_type == MsgType.START_PROCESSING:
            route.fn(sm.master.channel.conn, go)
    return sm


def _requests(sm: StreamManager) -> list[tuple[int, str]]:
    conn = sm.master.channel.conn
    assert isinstance(conn, _MasterConn)
    out = []
    for f in conn.sent:
        if frame_type(f) == MsgType.ROLLBACK_REQUEST:
            m = decode_as(pb.RollbackRequest, MsgType.ROLLBACK_REQUEST, f)
            out.append((m.restore_id, m.reason))
    return out


def test_a_held_overflow_drop_asks_for_a_rollback_and_the_heartbeat_asks_again(sm: StreamManager) -> None:
    sm.forwarder.drop(DropReason.HELD_OVERFLOW, encode_batch_frame(3, 2, b"x", MsgType.TUPLE_BATCH, 1))
    assert _requests(sm) == [(7, "frames dropped (held-overflow)")]
    sm.master.heartbeat(with_metrics=False)
    sm.master.heartbeat(with_metrics=False)
    assert len(_requests(sm)) == 3  # unanswered: with every heartbeat


def test_markers_stop_at_this_stream_manager_until_the_loss_is_answered(sm: StreamManager) -> None:
    inbound = Inbound(sm)
    routes = inbound.routes()
    spout = FakeConn(PeerIdentity("instance", "1"))
    sm.instances.add(spout, 1, pid=11)
    restored = pb.StateRestored(restore_id=7, task_id=1, ok=True)
    sm.ckpt.on_state_restored(spout, restored)  # its fence: its frames are the new run's
    count = FakeConn(PeerIdentity("instance", "3"))
    sm.instances.add(count, 3, pid=13)
    sm.ckpt.on_state_restored(count, pb.StateRestored(restore_id=7, task_id=3, ok=True))
    marker = encode_marker(3, 1, 40)
    routes.table("instance")[MsgType.CKPT_MARKER](spout, marker)
    assert marker in count.sent  # no loss: the marker reaches the local count task
    sm.instance_lost(FakeConn(PeerIdentity("instance", "9")))  # an unknown connection: nothing lost
    assert _requests(sm) == []
    sm.data_lost("the connection of instance task 5 closed")
    count.sent.clear()
    routes.table("instance")[MsgType.CKPT_MARKER](spout, encode_marker(3, 1, 41))
    batch = encode_batch_frame(3, 1, b"w", MsgType.TUPLE_BATCH, 1)
    routes.table("instance")[MsgType.TUPLE_BATCH](spout, batch)
    assert count.sent == [batch]  # tuples still flow; the marker of checkpoint 41 does not
    assert sm.ckpt.losses.markers_dropped == 1


def test_a_second_connection_from_a_peer_while_its_first_is_open_is_a_loss(sm: StreamManager) -> None:
    inbound = Inbound(sm)
    hello = inbound.routes().table("stmgr")[MsgType.STMGR_HELLO]
    first, second = FakeConn(PeerIdentity("stmgr", "1")), FakeConn(PeerIdentity("stmgr", "1"))
    frame = encode_frame(MsgType.STMGR_HELLO, pb.StmgrHello(container=1).SerializeToString())
    hello(first, frame)
    assert _requests(sm) == []
    hello(second, frame)  # the first is half-open: what was in flight on it is lost
    assert _requests(sm) == [(7, "a second connection from stream manager 1 while its first was open")]
    assert first.closed == "the peer opened a new connection: this one is half-open"
    assert second.is_open


def test_an_instance_registered_again_while_its_old_connection_is_open_is_a_loss(sm: StreamManager) -> None:
    """The old connection's close reports nothing (the task's connection is the new one by
    then), so the registration itself says what was in flight on the old one is lost."""
    old, new = FakeConn(PeerIdentity("instance", "3")), FakeConn(PeerIdentity("instance", "3"))
    req = pb.RegisterInstanceRequest(task_id=3, component="count", pid=13)
    sm.register_instance(old, req)
    assert _requests(sm) == []
    sm.register_instance(new, req)
    assert _requests(sm) == [(7, "instance task 3 registered again while its old connection was open")]
    assert old.closed == "task 3 registered again on a new connection"


def test_a_task_the_plan_does_not_hold_closing_its_connection_is_no_loss(sm: StreamManager) -> None:
    """A task a live rescale removed exits after the switch, and one it added may restart before
    the switch: no tuple of the run is routed to either and what they sent is fenced off, so
    their connection's close asks for no rollback (each would cost every task a restore). A task
    of the plan closing its connection still does."""
    staged = FakeConn(PeerIdentity("instance", "9"))
    sm.instances.add(staged, 9, pid=19)  # not in the plan: staged by a rescale, or removed by one
    sm.instance_lost(staged)
    assert _requests(sm) == []
    count = FakeConn(PeerIdentity("instance", "3"))
    sm.instances.add(count, 3, pid=13)
    sm.instance_lost(count)
    assert _requests(sm) == [(7, "the connection of instance task 3 closed")]


def test_effectively_once_every_instance_connection_holds_back_its_output(sm: StreamManager,
                                                                         tmp_path: Path) -> None:
    """What waits for a slow task stays in the stream manager, where a restore drops the old
    run's batches (tests/unit/common/test_held_output.py), not in the socket's buffer, where
    the restore command would wait behind it: set for an instance that registers after the
    plan, and for one that was there before it."""
    conn = FakeConn(PeerIdentity("instance", "3"))
    sm.register_instance(conn, pb.RegisterInstanceRequest(task_id=3, component="count", pid=13))
    assert conn.held_share == INSTANCE_SHARE
    other = StreamManager(topology="wc", container=0, secret=b"s" * 32,
                          state=LocalFsStateManager(tmp_path / "state2"), port_file=tmp_path / "stmgr2.port",
                          log=logging.getLogger("stmgr[0]"))
    early = FakeConn(PeerIdentity("instance", "3"))
    other.instances.add(early, 3, pid=13)
    assert not hasattr(early, "held_share")
    other.clique.set_plan = lambda plan: None  # type: ignore[method-assign]
    plan = word_count_plan()
    topo = dataclasses.replace(plan.topology, config={"topology.reliability.mode": "EFFECTIVELY_ONCE"})
    other.on_new_pplan(json.dumps(dataclasses.replace(plan, topology=topo).to_dict()).encode())
    assert early.held_share == INSTANCE_SHARE
