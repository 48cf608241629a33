"""Messages that name a task or a container are taken only from their owner (stream_manager/servers.py
``servers.Inbound``): an instance reports metrics, readiness, saved checkpoints and restores only for the
task it registered as, a peer stream manager announces backpressure, fences and hellos only for
the container its handshake proved. Anything else is refused like a batch from the wrong source:
counted (``__bad-frames/source``), one line, the connection closed, nothing acted on."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message

from heron_py.common.framing import MsgType, encode_frame
from heron_py.common.handshake import PeerIdentity
from heron_py.common.wire import encode_msg
from heron_py.state.localfs import LocalFsStateManager
from proto import heron_py_pb2 as pb
from stream_manager.main import StreamManager
from stream_manager.servers import Inbound
from tests.fakes import FakeConn, word_count_plan


class _MasterConn(FakeConn):
    def send_msg(self, msg: Message) -> None:
        self.sent.append(encode_msg(msg))


@pytest.fixture
def sm(tmp_path: Path) -> StreamManager:
    sm = StreamManager(topology="wc", container=0, secret=b"s" * 32, state=LocalFsStateManager(tmp_path / "state"),
                       port_file=tmp_path / "stmgr.port", log=logging.getLogger("stmgr[0]"))
    sm.clique.set_plan = lambda plan: None  # type: ignore[method-assign]  # no peer connections here
    sm.on_new_pplan(json.dumps(word_count_plan().to_dict()).encode())
    sm.master.channel.conn = _MasterConn(PeerIdentity("tmanager", ""))  # type: ignore[assignment]
    return sm


def _instance(sm: StreamManager, task: int) -> FakeConn:
    conn = FakeConn(PeerIdentity("instance", str(task)))
    sm.instances.add(conn, task, pid=100 + task)  # registered: its connection carries its task
    return conn


def _send(sm: StreamManager, conn: FakeConn, msg_type: MsgType, msg: Any) -> bytes:
    frame = encode_frame(msg_type, msg.SerializeToString())
    assert conn.identity is not None
    Inbound(sm).routes().table(conn.identity.role)[msg_type](conn, frame)  # type: ignore[arg-type]
    return frame


def _refused(sm: StreamManager, conn: FakeConn, caplog: pytest.LogCaptureFixture, line: str, n: int = 1) -> None:
    assert conn.closed == line.split(" from ")[0].replace("refused a ", "a ") + " it may not send"
    assert sm.counters.bad_frame_source == n and sm.counters.bad_frames == n
    assert line in [r.getMessage() for r in caplog.records]


def test_an_instance_reports_metrics_only_for_its_own_task(sm: StreamManager, caplog) -> None:
    mine = _instance(sm, 3)
    _send(sm, mine, MsgType.INSTANCE_METRICS, pb.InstanceMetrics(task_id=3, emitted=5))
    assert sm.instances.metrics[3].emitted == 5 and mine.is_open
    other = _instance(sm, 2)
    _send(sm, other, MsgType.INSTANCE_METRICS, pb.InstanceMetrics(task_id=3, emitted=999))
    assert sm.instances.metrics[3].emitted == 5
    _refused(sm, other, caplog, "refused a INSTANCE_METRICS from instance 2 (instance 2, registered as task 2) for "
                                "task 3; closing the connection")


def test_an_unregistered_instance_reports_nothing(sm: StreamManager, caplog) -> None:
    stranger = FakeConn(PeerIdentity("instance", "4"))
    _send(sm, stranger, MsgType.INSTANCE_METRICS, pb.InstanceMetrics(task_id=4))
    assert 4 not in sm.instances.metrics
    _refused(sm, stranger, caplog, "refused a INSTANCE_METRICS from instance 4 (instance 4, not registered) for "
                                   "task 4; closing the connection")


def test_an_instance_is_ready_only_for_its_own_task(sm: StreamManager, caplog) -> None:
    mine, other = _instance(sm, 3), _instance(sm, 2)
    _send(sm, other, MsgType.INSTANCE_READY, pb.InstanceReady(task_id=3, pid=77))
    assert 3 not in sm.instances.ready
    _refused(sm, other, caplog, "refused a INSTANCE_READY from instance 2 (instance 2, registered as task 2) for "
                                "task 3; closing the connection")
    _send(sm, mine, MsgType.INSTANCE_READY, pb.InstanceReady(task_id=3, pid=103))
    assert sm.instances.ready[3] == 103


def test_a_saved_checkpoint_is_relayed_only_for_the_senders_task(sm: StreamManager, caplog) -> None:
    master = sm.master.channel.conn
    assert isinstance(master, _MasterConn)
    mine, other = _instance(sm, 3), _instance(sm, 2)
    _send(sm, other, MsgType.CHECKPOINT_SAVED, pb.CheckpointSaved(checkpoint_id=9, task_id=3))
    assert master.sent == []
    _refused(sm, other, caplog, "refused a CHECKPOINT_SAVED from instance 2 (instance 2, registered as task 2) for "
                                "task 3; closing the connection")
    frame = _send(sm, mine, MsgType.CHECKPOINT_SAVED, pb.CheckpointSaved(checkpoint_id=9, task_id=3))
    assert master.sent == [frame]  # relayed as it came


def test_a_restore_is_reported_only_for_the_senders_task(sm: StreamManager, caplog) -> None:
    master = sm.master.channel.conn
    assert isinstance(master, _MasterConn)
    other = _instance(sm, 2)
    _send(sm, other, MsgType.STATE_RESTORED, pb.StateRestored(restore_id=4, task_id=3, ok=True))
    assert master.sent == []
    _refused(sm, other, caplog, "refused a STATE_RESTORED from instance 2 (instance 2, registered as task 2) for "
                                "task 3; closing the connection")


def test_a_peer_announces_backpressure_only_for_its_own_container(sm: StreamManager, caplog) -> None:
    peer = FakeConn(PeerIdentity("stmgr", "1"))
    _send(sm, peer, MsgType.BACKPRESSURE, pb.BackPressure(container=2, start=True, cause="task 9"))
    assert 2 not in sm.bp.peers and 1 not in sm.bp.peers
    _refused(sm, peer, caplog, "refused a BACKPRESSURE from stmgr 1 (stmgr 1) for container 2; closing the "
                               "connection")
    honest = FakeConn(PeerIdentity("stmgr", "2"))
    _send(sm, honest, MsgType.BACKPRESSURE, pb.BackPressure(container=2, start=True, cause="task 9"))
    assert 2 in sm.bp.peers and honest.is_open


def test_a_peer_fences_and_says_hello_only_for_its_own_container(sm: StreamManager, caplog) -> None:
    fencer = FakeConn(PeerIdentity("stmgr", "1"))
    _send(sm, fencer, MsgType.RESTORE_FENCE, pb.RestoreFence(container=2, restore_id=5))
    _refused(sm, fencer, caplog, "refused a RESTORE_FENCE from stmgr 1 (stmgr 1) for container 2; closing the "
                                 "connection")
    greeter = FakeConn(PeerIdentity("stmgr", "1"))
    _send(sm, greeter, MsgType.STMGR_HELLO, pb.StmgrHello(container=2))
    _refused(sm, greeter, caplog, "refused a STMGR_HELLO from stmgr 1 (stmgr 1) for container 2; closing the "
                                  "connection", n=2)
