"""The stream manager's checkpoint relay (stream_manager/checkpoints.py): what mutation testing
found unchecked. The frames name this stream manager's container, a connection with no fence is
fenced from the first restore on, a restore seen twice is taken once, and each step is one line
in the log."""

from __future__ import annotations

import logging

import pytest

from heron_py.common.framing import MsgType, encode_frame, frame_type
from heron_py.common.handshake import PeerIdentity
from heron_py.common.net import Routes
from proto import heron_py_pb2 as pb
from stream_manager.checkpoints import CheckpointRelay
from tests.fakes import FakeConn

LOG = logging.getLogger("stmgr[5]")


class Relay:
    def __init__(self) -> None:
        self.instances = {3: FakeConn(PeerIdentity("instance", "3"))}
        self.peer = FakeConn(PeerIdentity("stmgr", "1"))
        self.to_master: list[bytes] = []
        self.held = 4
        self.relay = CheckpointRelay(5, LOG, to_master=self.to_master.append,
                                     instances=lambda: list(self.instances.values()), instance=self.instances.get,
                                     local_spouts=lambda: [3], peers=lambda: [self.peer],
                                     discard_held=lambda: self.held)
        self.routes = Routes("stmgr's master link", self.relay.master_routes()).table("tmanager")

    def command(self, msg_type: MsgType, msg: object) -> None:
        self.routes[msg_type](FakeConn(PeerIdentity("tmanager", "")),
                              encode_frame(msg_type, msg.SerializeToString()))  # type: ignore[attr-defined]


def test_the_first_restore_fences_and_every_step_is_one_line(caplog: pytest.LogCaptureFixture) -> None:
    r = Relay()
    relay = r.relay
    stranger = FakeConn(PeerIdentity("stmgr", "2"))
    assert relay.admits(stranger)  # before any restore nothing is fenced
    with caplog.at_level(logging.INFO, logger="stmgr[5]"):
        r.command(MsgType.RESTORE_STATE, pb.RestoreState(restore_id=1, checkpoint_id=0, reason="topology start"))
        assert not relay.admits(stranger)  # from restore 1 on, a connection with no fence is fenced
        [fence] = r.peer.sent
        assert frame_type(fence) == MsgType.RESTORE_FENCE
        assert pb.RestoreFence.FromString(fence[6:]).container == 5
        r.command(MsgType.RESTORE_STATE, pb.RestoreState(restore_id=1, checkpoint_id=0, reason="again"))
        assert len(r.peer.sent) == 1 and len(r.instances[3].sent) == 1  # the same restore, taken once
        r.command(MsgType.START_PROCESSING, pb.StartProcessing(restore_id=0))
        r.command(MsgType.START_PROCESSING, pb.StartProcessing(restore_id=1))
        r.held = 0
        r.command(MsgType.RESTORE_STATE, pb.RestoreState(restore_id=2, checkpoint_id=9, reason="failure: x"))
    assert relay.loss("frames dropped (held-overflow)")
    assert pb.RollbackRequest.FromString(r.to_master[-1][6:]).container == 5
    assert [m.getMessage() for m in caplog.records] == [
        "restore 1 to a clean start (topology start): 4 held frames of the old run dropped",
        "ignoring restore 1: restore 1 is newer or the same",
        "ignoring the start of restore 0: restore 1 is newer",
        "restore 1 done everywhere: processing (old-run frames fenced off: 1)",
        "restore 2 to checkpoint 9 (failure: x): 0 held frames of the old run dropped",
        "effectively once: frames dropped (held-overflow); asking the master to roll back the run of restore 2 (no "
        "checkpoint marker passes until it answers)"]
