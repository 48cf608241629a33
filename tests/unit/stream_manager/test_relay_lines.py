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
                                     discard_held=lambda conns: self.held)
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


def test_a_checkpoints_word_reaches_every_local_instance() -> None:
    r = Relay()
    r.instances[4] = FakeConn(PeerIdentity("instance", "4"))
    r.command(MsgType.CHECKPOINT_COMMITTED, pb.CheckpointCommitted(checkpoint_id=12))
    for conn in r.instances.values():
        [word] = conn.sent
        assert frame_type(word) == MsgType.CHECKPOINT_COMMITTED
        assert pb.CheckpointCommitted.FromString(word[6:]).checkpoint_id == 12


def test_a_fence_moves_only_forward_and_only_on_its_own_connection(caplog: pytest.LogCaptureFixture) -> None:
    r = Relay()
    relay = r.relay
    inst = r.instances[3]
    r.command(MsgType.RESTORE_STATE, pb.RestoreState(restore_id=5, checkpoint_id=0, reason="start"))
    relay.on_state_restored(inst, pb.StateRestored(restore_id=5, task_id=3, ok=False, error="bad"))
    assert not relay.admits(inst)  # a failed restore is no fence
    relay.on_state_restored(inst, pb.StateRestored(restore_id=5, task_id=4, ok=True))
    assert not relay.admits(inst)  # another task's report on this connection is no fence either
    relay.on_state_restored(inst, pb.StateRestored(restore_id=5, task_id=3, ok=True))
    relay.on_state_restored(inst, pb.StateRestored(restore_id=3, task_id=3, ok=True))  # a late, older one
    assert relay.admits(inst)
    peer, other = FakeConn(PeerIdentity("stmgr", "1")), FakeConn(PeerIdentity("stmgr", "2"))
    with caplog.at_level(logging.WARNING, logger="stmgr[5]"):
        relay.on_peer_fence(other, pb.RestoreFence(container=1, restore_id=5))
        relay.on_peer_fence(FakeConn(None), pb.RestoreFence(container=1, restore_id=5))  # not authenticated
    assert not relay.admits(other)  # container 1's fence on container 2's connection: ignored
    assert [m.getMessage() for m in caplog.records] == [
        "a restore fence for container 1 on the connection of 2; ignored",
        "a restore fence for container 1 on the connection of ?; ignored"]
    relay.on_peer_fence(peer, pb.RestoreFence(container=1, restore_id=5))
    relay.on_peer_fence(peer, pb.RestoreFence(container=1, restore_id=4))
    assert relay.admits(peer)


def test_a_restore_answers_the_reported_loss_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    r = Relay()
    r.command(MsgType.RESTORE_STATE, pb.RestoreState(restore_id=1, checkpoint_id=0, reason="start"))
    r.relay.loss("the connection of instance task 3 closed")
    with caplog.at_level(logging.INFO, logger="stmgr[5]"):
        r.command(MsgType.RESTORE_STATE, pb.RestoreState(restore_id=2, checkpoint_id=0, reason="rollback"))
    assert ("restore 2 replaces the run whose loss we reported (markers dropped meanwhile: 0)"
            in [m.getMessage() for m in caplog.records])
