"""Effectively once, the runtime parts without processes: a task's StatefulTask over a real
component host and checkpoint storage (heron_py/runtime/stateful.py), and the stream manager's
CheckpointRelay with its per-connection fences (stream_manager/checkpoints.py)."""

from __future__ import annotations

import logging
import pickle
from collections import Counter
from collections.abc import Iterator

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.state.stateful_component import StatefulComponent
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.checkpoint.storage import LocalFsStorage, packing_of
from heron_py.common.framing import (
    BATCH_HEADER,
    BODY_OFFSET,
    HEADER_SIZE,
    MsgType,
    decode_marker,
    encode_batch_frame,
    encode_frame,
    encode_marker,
    frame_type,
)
from heron_py.common.handshake import PeerIdentity
from heron_py.common.net import Routes
from heron_py.common.serialization import dumps_batch, loads_batch
from heron_py.common.wire import decode_as
from heron_py.planner.grouping import make_router
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import HostOptions, make_host
from heron_py.runtime.stateful import Phase, StatefulTask, downstream_tasks, upstream_tasks
from heron_py.testing import Harness
from proto import heron_py_pb2 as pb
from stream_manager.checkpoints import CheckpointRelay
from tests.fakes import FakeConn
from tests.support import mark_saved

LOG = logging.getLogger("test")


class Letters(Spout, StatefulComponent):
    outputs = ["w"]

    def init_state(self, stateful_state):
        self.state = stateful_state
        self.pos = stateful_state.get("pos") or 0

    def pre_save(self, checkpoint_id):
        self.state.put("pos", self.pos)

    def initialize(self, config, context):
        self.inits = getattr(self, "inits", 0) + 1

    def next_tuple(self):
        self.emit(["abcdefgh"[self.pos % 8]])
        self.pos += 1

    def activate(self):
        self.active = True

    def close(self):
        self.closed = True


class Count(Bolt, StatefulComponent):
    outputs = ["w", "n"]

    def init_state(self, stateful_state):
        self.state = stateful_state
        self.counts = Counter(dict(stateful_state.enumerate()))
        self.saved_ids = getattr(self, "saved_ids", [])

    def pre_save(self, checkpoint_id):
        self.saved_ids.append(checkpoint_id)
        for k, v in self.counts.items():
            self.state.put(k, v)

    def initialize(self, config, context):
        pass

    def process(self, tup):
        self.counts[tup.values[0]] += 1
        self.emit([tup.values[0], self.counts[tup.values[0]]])


class Plain(Bolt):
    outputs = []

    def process(self, tup):
        pass


def _plan() -> PhysicalPlan:
    b = TopologyBuilder("eo")
    s = b.add_spout("letters", Letters, par=2)
    c = b.add_bolt("count", Count, par=1, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("sink", Plain, par=2, inputs={c: Grouping.fields("w")})
    b.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE"})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


class _Task:
    """One task: its host, its StatefulTask and what it sent, split by kind."""

    def __init__(self, plan: PhysicalPlan, component: str, storage: LocalFsStorage, i: int = 0) -> None:
        self.task_id = plan.packing.tasks_of(component)[i]
        self.sent: list[bytes] = []
        self.host = make_host(plan, self.task_id, self.sent.extend, HostOptions())
        self.rt = StatefulTask(self.host, storage, "eo", self.sent.extend, align_bytes=1 << 20, log=LOG)

    def take(self, kind: int) -> list[bytes]:
        out = [f for f in self.sent if frame_type(f) == kind]
        self.sent[:] = [f for f in self.sent if frame_type(f) != kind]
        return out

    def report(self, kind: int, msg: type) -> list:
        out = []
        for f in self.take(kind):
            m = msg()
            m.ParseFromString(f[6:])
            out.append(m)
        return out


@pytest.fixture
def storage(tmp_path) -> LocalFsStorage:
    return LocalFsStorage(tmp_path / "ckpt")


def test_channels_from_the_plan():
    plan = _plan()
    spouts = plan.packing.tasks_of("letters")
    count = plan.packing.tasks_of("count")[0]
    assert upstream_tasks(plan, "count") == sorted(spouts)
    assert downstream_tasks(plan, "letters") == [count]
    assert downstream_tasks(plan, "count") == sorted(plan.packing.tasks_of("sink"))
    assert downstream_tasks(plan, "sink") == []


def test_first_restore_calls_init_state_before_initialize_and_reports(storage):
    spout = _Task(_plan(), "letters", storage)
    assert spout.rt.phase is Phase.WAITING_RESTORE and not hasattr(spout.host.user, "pos")
    spout.rt.restore(7, 0)
    assert spout.host.user.pos == 0 and spout.host.user.inits == 1
    [done] = spout.report(MsgType.STATE_RESTORED, pb.StateRestored)
    assert (done.restore_id, done.task_id, done.ok) == (7, spout.task_id, True)
    assert spout.rt.phase is Phase.RESTORED and not spout.rt.processing
    assert not spout.rt.start_processing(6) and spout.rt.start_processing(7) and spout.rt.processing


def test_spout_saves_then_sends_markers_behind_its_tuples_and_restores_its_position(storage):
    plan = _plan()
    spout = _Task(plan, "letters", storage)
    spout.rt.restore(1, 0)
    spout.rt.start_processing(1)
    spout.sent.clear()
    for _ in range(5):
        spout.host.next_tuples(1)
    spout.rt.start_checkpoint(3)
    kinds = [frame_type(f) for f in spout.sent]
    # the save report (for the master), then the five tuples (one batch) ahead of the marker
    assert kinds == [MsgType.CHECKPOINT_SAVED, MsgType.TUPLE_BATCH, MsgType.CKPT_MARKER]
    count = plan.packing.tasks_of("count")[0]
    assert decode_marker(spout.sent[2]) == (spout.task_id, 3)
    assert BATCH_HEADER.unpack_from(spout.sent[2], HEADER_SIZE)[0] == count
    spout.sent.clear()
    spout.rt.start_checkpoint(3)  # a duplicate start changes nothing
    assert spout.sent == []
    mark_saved(storage, "eo", 3)
    for _ in range(4):
        spout.host.next_tuples(1)
    assert spout.host.user.pos == 9
    old = spout.host.user
    spout.host.start()
    spout.rt.restore(2, 3)  # rolled back: the position of checkpoint 3, not processing until the start
    # as Heron's instance: the component closed and made anew (init_state, initialize, activate)
    new = spout.host.user
    assert new is not old and old.closed and new.active and not hasattr(new, "closed")
    assert new.pos == 5 and new.inits == 1 and not spout.rt.processing


def _batch(dest: int, src: int, letters: str) -> bytes:
    return encode_batch_frame(dest, src, dumps_batch([("default", [x]) for x in letters]), count=len(letters))


def test_bolt_aligns_markers_saves_a_consistent_cut_and_rolls_back(storage):
    plan = _plan()
    bolt = _Task(plan, "count", storage)
    s1, s2 = plan.packing.tasks_of("letters")
    me = bolt.task_id
    bolt.rt.restore(1, 0)
    bolt.rt.start_processing(1)
    bolt.rt.on_batch(_batch(me, s1, "aa"))
    bolt.rt.on_marker(encode_marker(me, s1, 5))
    bolt.rt.on_batch(_batch(me, s1, "bbb"))  # after s1's marker: held, not in checkpoint 5
    bolt.rt.on_batch(_batch(me, s2, "c"))  # before s2's marker: in checkpoint 5
    assert bolt.host.user.counts == Counter(a=2, c=1)
    assert bolt.take(MsgType.CHECKPOINT_SAVED) == []
    bolt.rt.on_marker(encode_marker(me, s2, 5))
    [saved] = bolt.report(MsgType.CHECKPOINT_SAVED, pb.CheckpointSaved)
    assert saved.stored  # stateful: the complete marker lists it
    assert (saved.checkpoint_id, saved.task_id) == (5, me) and saved.size_bytes > 0
    markers = bolt.take(MsgType.CKPT_MARKER)
    assert sorted(BATCH_HEADER.unpack_from(m, HEADER_SIZE)[0] for m in markers) == downstream_tasks(plan, "count")
    assert bolt.host.user.counts == Counter(a=2, c=1, b=3)  # the held batch, processed after the save
    assert bolt.host.user.saved_ids == ["5"]  # heronpy passes the id as a string
    mark_saved(storage, "eo", 5)
    assert pickle.loads(storage.load("eo", 5, me)) == {"a": 2, "c": 1}
    bolt.host.flush()
    bolt.sent.clear()
    bolt.rt.on_batch(_batch(me, s2, "zz"))
    old = bolt.host.user
    bolt.rt.restore(2, 5)
    assert bolt.host.user is not old and bolt.host.user.counts == Counter(a=2, c=1)
    bolt.host.flush()
    assert [frame_type(f) for f in bolt.sent] == [MsgType.STATE_RESTORED]  # nothing of the old run
    bolt.rt.on_batch(_batch(me, s1, "q"))  # input after the restore reaches the new component
    assert bolt.host.user.counts == Counter(a=2, c=1, q=1) and "q" not in old.counts


def test_unstateful_bolt_reports_an_empty_save_and_a_corrupt_checkpoint_is_reported(storage, tmp_path):
    plan = _plan()
    sink = _Task(plan, "sink", storage)
    count = plan.packing.tasks_of("count")[0]
    sink.rt.restore(1, 0)
    sink.rt.on_marker(encode_marker(sink.task_id, count, 2))
    [saved] = sink.report(MsgType.CHECKPOINT_SAVED, pb.CheckpointSaved)
    assert saved.size_bytes == 0 and sink.take(MsgType.CKPT_MARKER) == []  # no downstream
    assert not saved.stored  # stateless: the complete marker will not list it
    bolt = _Task(plan, "count", storage)
    storage.save("eo", 9, bolt.task_id, b"not a pickle")
    mark_saved(storage, "eo", 9)
    bolt.rt.restore(4, 9)
    [done] = bolt.report(MsgType.STATE_RESTORED, pb.StateRestored)
    assert not done.ok and done.error.startswith("UnpicklingError: ")
    assert bolt.rt.phase is Phase.WAITING_RESTORE


# --- the stream manager's relay ---


class _Relay:
    def __init__(self) -> None:
        self.instances = {3: FakeConn(PeerIdentity("instance", "3")), 4: FakeConn(PeerIdentity("instance", "4"))}
        self.peers = [FakeConn(PeerIdentity("stmgr", "1"))]
        self.to_master: list[bytes] = []
        self.discarded = 0
        self.relay = CheckpointRelay(0, LOG, to_master=self.to_master.append,
                                     instances=lambda: list(self.instances.values()), instance=self.instances.get,
                                     local_spouts=lambda: [3], peers=lambda: self.peers, discard_held=self._discard)

    def _discard(self, conns: object) -> int:
        self.discarded += 1
        return 0


def _frame(msg_type: int, msg) -> bytes:
    return encode_frame(msg_type, msg.SerializeToString())


def _from_master(relay: CheckpointRelay, msg_type: int, frame: bytes) -> None:
    """A master's command, through the routes the relay gives the stream manager's master link."""
    master = FakeConn(PeerIdentity("tmanager", ""))
    Routes("stmgr's master link", relay.master_routes()).table("tmanager")[msg_type](master, frame)


def _from_instance(relay: CheckpointRelay, conn: FakeConn, msg_type: int, frame: bytes) -> None:
    assert msg_type == MsgType.STATE_RESTORED
    relay.on_state_restored(conn, decode_as(pb.StateRestored, msg_type, frame))


def _fence(relay: CheckpointRelay, conn: FakeConn, frame: bytes) -> None:
    relay.on_peer_fence(conn, decode_as(pb.RestoreFence, MsgType.RESTORE_FENCE, frame))


def _types(conn: FakeConn) -> Iterator[int]:
    return (frame_type(f) for f in conn.sent)


def test_relay_fences_each_connection_until_its_own_marker_of_the_restore():
    r = _Relay()
    relay = r.relay
    inst, peer_in = r.instances[4], FakeConn(PeerIdentity("stmgr", "1"))
    assert relay.admits(inst) and relay.admits(peer_in)  # no restore yet: nothing is fenced
    _from_master(relay, MsgType.RESTORE_STATE, _frame(MsgType.RESTORE_STATE, pb.RestoreState(
        restore_id=10, checkpoint_id=4, reason="test")))
    assert r.discarded == 1 and relay.restoring
    assert list(_types(r.peers[0])) == [MsgType.RESTORE_FENCE]
    assert all(list(_types(c)) == [MsgType.RESTORE_STATE] for c in r.instances.values())
    assert not relay.admits(inst) and not relay.admits(peer_in) and relay.fenced_frames == 2
    # the instance's StateRestored is its fence (and goes on to the master)
    restored = _frame(MsgType.STATE_RESTORED, pb.StateRestored(restore_id=10, task_id=4, ok=True))
    _from_instance(relay, inst, MsgType.STATE_RESTORED, restored)
    assert relay.admits(inst) and r.to_master == [restored]
    # a peer's fence counts only on that peer's own connection
    _fence(relay, FakeConn(PeerIdentity("stmgr", "2")), _frame(MsgType.RESTORE_FENCE, pb.RestoreFence(container=1,
                                                                                           restore_id=10)))
    assert not relay.admits(peer_in)
    _fence(relay, peer_in, _frame(MsgType.RESTORE_FENCE, pb.RestoreFence(container=1, restore_id=10)))
    assert relay.admits(peer_in)
    # a closed connection's fence goes with it: a successor starts fenced again
    relay.on_closed(peer_in)
    peer_again = FakeConn(PeerIdentity("stmgr", "1"))
    assert not relay.admits(peer_again)


def test_fences_are_per_connection_so_an_old_connection_closing_late_takes_nothing():
    """Issue 37, hole 2: an instance whose socket dropped registers again on a new connection
    and restores there; the old connection's close, reported after that, must not remove the
    new connection's fence (keyed by (role, id) it did, and its frames were dropped for good)."""
    r = _Relay()
    relay = r.relay
    old = r.instances[4]
    _from_master(relay, MsgType.RESTORE_STATE, _frame(MsgType.RESTORE_STATE, pb.RestoreState(
        restore_id=10, checkpoint_id=4, reason="test")))
    new = FakeConn(PeerIdentity("instance", "4"))
    r.instances[4] = new
    relay.on_instance_registered(new, 4)
    assert list(_types(new)) == [MsgType.RESTORE_STATE]  # mid-restore: told to restore on it too
    _from_instance(relay, new, MsgType.STATE_RESTORED, _frame(MsgType.STATE_RESTORED, pb.StateRestored(
        restore_id=10, task_id=4, ok=True)))
    relay.on_closed(old)  # the old socket's close arrives late
    assert relay.admits(new) and not relay.admits(old)


def _request(frame: bytes) -> tuple[int, int, str]:
    assert frame_type(frame) == MsgType.ROLLBACK_REQUEST
    msg = pb.RollbackRequest()
    msg.ParseFromString(frame[6:])
    return msg.container, msg.restore_id, msg.reason


def _answer(relay: CheckpointRelay, restore_id: int, acted: bool) -> None:
    _from_master(relay, MsgType.ROLLBACK_ANSWER, _frame(MsgType.ROLLBACK_ANSWER, pb.RollbackAnswer(
        restore_id=restore_id, acted=acted, reason="test")))


def _restore(relay: CheckpointRelay, restore_id: int, then_process: bool = True) -> None:
    _from_master(relay, MsgType.RESTORE_STATE, _frame(MsgType.RESTORE_STATE, pb.RestoreState(
        restore_id=restore_id, checkpoint_id=4, reason="test")))
    if then_process:
        _from_master(relay, MsgType.START_PROCESSING, _frame(MsgType.START_PROCESSING,
                                                               pb.StartProcessing(restore_id=restore_id)))


def test_lost_in_flight_data_asks_the_master_to_roll_back_once_per_run():
    """A data-path connection that closed or a counted drop would make the loss permanent at
    the next checkpoint: the relay asks for a rollback of the current run, once."""
    r = _Relay()
    relay = r.relay
    assert not relay.loss("before any restore")  # nothing runs yet: the first restore comes anyway
    assert relay.losses.unanswered() == [] and relay.losses.admits_marker()
    _restore(relay, 10)
    r.to_master.clear()
    assert relay.loss("the connection of instance task 4 closed")
    assert not relay.loss("the connection to stream manager 1 closed")  # once per run
    [req] = r.to_master
    assert _request(req) == (0, 10, "the connection of instance task 4 closed")
    _restore(relay, 11)
    assert relay.losses.unanswered() == [] and relay.losses.admits_marker()  # the newer restore answered it
    assert relay.loss("frames dropped (held-overflow)")  # a new run: asked again


def test_a_rollback_request_is_asked_again_until_answered_and_no_marker_passes_meanwhile():
    """The request went to a master that could not act, or was lost with the master link: the
    stream manager sends it again with every heartbeat (``unanswered``), and drops checkpoint
    markers until the master answers or a newer restore comes (a checkpoint whose markers
    passed after the loss would hold it)."""
    r = _Relay()
    relay = r.relay
    _restore(relay, 10)
    r.to_master.clear()
    assert relay.loss("the connection from stream manager 1 closed")
    [req] = r.to_master
    assert relay.losses.unanswered() == [req]
    assert relay.losses.unanswered() == [req]  # with every heartbeat, as long as it takes
    assert not relay.losses.admits_marker() and not relay.losses.admits_marker() and relay.losses.markers_dropped == 2
    _answer(relay, 9, acted=True)  # an answer about an older run: not ours
    assert relay.losses.unanswered() == [req]
    _answer(relay, 10, acted=True)  # the master rolls back: asked no more, markers wait for the restore
    assert relay.losses.unanswered() == [] and not relay.losses.admits_marker()
    _restore(relay, 11, then_process=False)
    assert relay.losses.admits_marker() and relay.losses.markers_dropped == 0


def test_a_moot_answer_lets_markers_pass_again():
    r = _Relay()
    relay = r.relay
    _restore(relay, 10, then_process=False)
    assert relay.loss("the connection to stream manager 1 closed")  # during the restore: the master decides
    assert not relay.losses.admits_marker()
    _answer(relay, 10, acted=False)  # no task processed restore 10 yet: nothing of its run was lost
    assert relay.losses.unanswered() == [] and relay.losses.admits_marker()
    assert relay.loss("frames dropped (held-overflow)")  # a later loss of the same run is asked again


def test_a_loss_after_a_moot_request_is_asked_anew():
    """A second loss while the first request waits for its answer: if the first is answered as
    moot (judged while the restore was under way), the second is asked on its own."""
    r = _Relay()
    relay = r.relay
    _restore(relay, 10, then_process=False)
    assert relay.loss("the connection to stream manager 1 closed")
    _from_master(relay, MsgType.START_PROCESSING, _frame(MsgType.START_PROCESSING,
                                                           pb.StartProcessing(restore_id=10)))
    r.to_master.clear()
    assert not relay.loss("frames dropped (held-overflow)")  # the request is pending: not sent twice
    assert r.to_master == []
    _answer(relay, 10, acted=False)
    [again] = r.to_master
    assert _request(again) == (0, 10, "frames dropped (held-overflow)")
    assert relay.losses.unanswered() == [again] and not relay.losses.admits_marker()


def test_relay_commands_late_instances_and_stale_restores():
    r = _Relay()
    relay = r.relay
    start = _frame(MsgType.START_CHECKPOINT, pb.StartCheckpoint(checkpoint_id=2))
    _from_master(relay, MsgType.START_CHECKPOINT, start)
    assert r.instances[3].sent == [start] and r.instances[4].sent == []  # spouts only
    assert relay.fence_frame() is None
    restore = _frame(MsgType.RESTORE_STATE, pb.RestoreState(restore_id=20, checkpoint_id=0))
    _from_master(relay, MsgType.RESTORE_STATE, restore)
    late = FakeConn(PeerIdentity("instance", "5"))
    relay.on_instance_registered(late, 5)
    assert late.sent == [restore]  # mid-restore: a new instance is told at once
    fence = pb.RestoreFence()
    fence.ParseFromString(relay.fence_frame()[6:])
    assert (fence.container, fence.restore_id) == (0, 20)
    _from_master(relay, MsgType.RESTORE_STATE, _frame(MsgType.RESTORE_STATE, pb.RestoreState(restore_id=19)))
    assert relay.restore_id == 20 and r.discarded == 1  # an older restore is ignored
    _from_master(relay, MsgType.START_PROCESSING, _frame(MsgType.START_PROCESSING, pb.StartProcessing(
        restore_id=19)))
    assert relay.restoring
    go = _frame(MsgType.START_PROCESSING, pb.StartProcessing(restore_id=20))
    _from_master(relay, MsgType.START_PROCESSING, go)
    assert not relay.restoring and r.instances[4].sent[-1] == go
    late2 = FakeConn(PeerIdentity("instance", "6"))
    relay.on_instance_registered(late2, 6)
    assert late2.sent == []


def test_marker_frames_round_trip():
    f = encode_marker(7, 3, 2**40)
    assert decode_marker(f) == (3, 2**40) and BATCH_HEADER.unpack_from(f, HEADER_SIZE)[0] == 7
    assert len(f) == BODY_OFFSET + 8
    assert loads_batch(dumps_batch([("default", [1])])) == [("default", [1])]


# --- the semantics, end to end through heron_py.testing.Harness (the tests above check the
# runtime's internals: phases, frame order, alignment, the relay's fences; they stay as they are)
def _letters(counts: Counter, pos: int, start: int = 0) -> Counter:
    counts.update("abcdefgh"[i % 8] for i in range(start, pos))
    return counts


def test_harness_rollback_restores_the_spouts_positions_and_the_counts_exactly():
    b = TopologyBuilder("eo")
    s = b.add_spout("letters", Letters, par=2)
    c = b.add_bolt("count", Count, par=1, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("sink", Plain, par=2, inputs={c: Grouping.fields("w")})
    b.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE",
                  "topology.stateful.checkpoint.interval.secs": "1000"})
    h = Harness(b, max_spout_calls=16)  # Letters never ends: 16 next_tuple calls per run
    h.run()
    assert [h.component("letters", i).pos for i in range(2)] == [8, 8]
    assert h.component("count").counts == Counter(dict.fromkeys("abcdefgh", 2))
    cid = h.checkpoint()  # saved at once by the spouts (positions 8), then 16 more calls run
    assert h.component("count").saved_ids == [str(cid)]
    assert h.component("count").counts == Counter(dict.fromkeys("abcdefgh", 4))
    h.kill_at("count", 0, 33)  # its next tuple
    r = h.run()
    count_task = _plan().packing.tasks_of("count")[0]  # the same components, the same packing
    assert r.kills == [f"task {count_task} of 'count' killed: kill_at its tuple 33"]
    assert r.restores == [cid]
    # exactly once: the checkpoint's counts (8 letters from each spout) plus what each restored
    # spout emitted since its restored position 8, nothing of the rolled-back run
    expected = Counter(dict.fromkeys("abcdefgh", 2))
    for i in range(2):
        letters = h.component("letters", i)
        assert letters.inits == 1  # a new component, initialized once after its restore
        _letters(expected, letters.pos, 8)
    assert h.component("count").counts == expected
    assert sum(expected.values()) > 16  # the run went on after the restore


def test_harness_a_crash_before_any_checkpoint_completed_is_a_clean_start():
    h = Harness(_plan().topology, max_spout_calls=4)
    h.kill_at("count", 0, 1)
    r = h.run()
    assert r.checkpoints == [] and r.restores == [0]  # no checkpoint yet: a clean start
    assert all(h.component("letters", i).inits == 1 for i in range(2))
    positions = [h.component("letters", i).pos for i in range(2)]
    assert h.component("count").counts == _letters(_letters(Counter(), positions[0]), positions[1])


def test_a_checkpoint_taken_under_another_packing_is_refused_with_one_line(storage):
    """A component whose state cannot be split (here: shuffle grouped, no merge rule) refuses a
    checkpoint taken with another parallelism rather than hand keys to the wrong task (the
    master then falls back, then waits for the operator)."""
    plan = _plan()
    bolt = _Task(plan, "count", storage)
    me = bolt.task_id
    storage.save("eo", 7, me, pickle.dumps({"a": 1}))
    storage.mark_complete("eo", 7, [me], {"count": (me, me + 10), "letters": (1, 2)})
    bolt.rt.restore(1, 7)
    [done] = bolt.report(MsgType.STATE_RESTORED, pb.StateRestored)
    assert not done.ok
    assert done.error == (f"CheckpointError: checkpoint 7 was taken with component 'count' on tasks [{me}, {me + 10}], "
                          f"which now runs on tasks [{me}]: its state cannot be split: its inputs are not all fields "
                          f"grouped and its topology.component.state.rescale is not merge; restore a checkpoint "
                          f"taken with this packing, or start clean (heron-py restore NAME --clean)")
    # the same packing restores (the other components' packing is theirs to check)
    storage.save("eo", 8, me, pickle.dumps({"a": 1}))
    storage.mark_complete("eo", 8, [me], {"count": (me,), "letters": (99,)})
    bolt.rt.restore(2, 8)
    [done] = bolt.report(MsgType.STATE_RESTORED, pb.StateRestored)
    assert done.ok and bolt.host.user.counts == Counter(a=1)


def _keyed_plan(count_par: int, count_config: dict | None = None) -> PhysicalPlan:
    b = TopologyBuilder("eo")
    s = b.add_spout("letters", Letters, par=2)
    b.add_bolt("count", Count, par=count_par, inputs={s: Grouping.fields("w")}, config=count_config or {})
    b.set_config({"topology.reliability.mode": "EFFECTIVELY_ONCE"})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


@pytest.mark.parametrize(("old", "new"), [(2, 3), (3, 2), (2, 5)])
def test_a_keyed_component_restored_on_another_parallelism_gets_the_keys_the_grouping_now_sends_it(
        storage, old: int, new: int):
    """Each new task takes the entries of the key groups it now owns from the old tasks' saves,
    so every count lands in the one task its word's tuples go to, and none is lost or doubled."""
    before = _keyed_plan(old)
    then = before.packing.tasks_of("count")
    words = [f"w{i}" for i in range(200)]
    sender = make_router(Grouping.fields("w"), target_tasks=then, local_tasks=frozenset(), field_indices=(0,))
    saved: dict[int, dict[str, int]] = {t: {} for t in then}
    for n, w in enumerate(words):
        saved[sender.choose([w])[0]][w] = n + 1
    for t in then:
        storage.save("eo", 7, t, pickle.dumps(saved[t]))
    storage.mark_complete("eo", 7, then, packing_of({t.task_id: t.component for t in before.packing.tasks}))
    after = _keyed_plan(new)
    now = after.packing.tasks_of("count")
    router = make_router(Grouping.fields("w"), target_tasks=now, local_tasks=frozenset(), field_indices=(0,))
    got: dict[str, int] = {}
    for i in range(new):
        bolt = _Task(after, "count", storage, i)
        bolt.rt.restore(1, 7)
        [done] = bolt.report(MsgType.STATE_RESTORED, pb.StateRestored)
        assert done.ok, done.error
        counts = bolt.host.user.counts
        assert all(router.choose([w]) == (bolt.task_id,) for w in counts)
        assert not set(counts) & set(got)
        got.update(counts)
    assert got == {w: n + 1 for n, w in enumerate(words)}


def test_a_component_whose_task_ids_moved_restores_by_position_and_a_merged_one_gets_every_entry(storage):
    plan = _keyed_plan(2)
    letters = plan.packing.tasks_of("letters")
    # same parallelism, other task ids (another component's change moved them): by position,
    # even for a spout whose state cannot be split
    storage.save("eo", 7, 21, pickle.dumps({"pos": {"a": 1}}))
    storage.save("eo", 7, 22, pickle.dumps({"pos": {"b": 2}}))
    storage.mark_complete("eo", 7, [21, 22], {"letters": (21, 22), "count": ()})
    for i, want in enumerate([{"a": 1}, {"b": 2}]):
        spout = _Task(plan, "letters", storage, i)
        spout.rt.restore(1, 7)
        [done] = spout.report(MsgType.STATE_RESTORED, pb.StateRestored)
        assert done.ok, done.error
        assert spout.rt.state.get("pos") == want and letters[i] not in (21, 22)
    from dataclasses import replace

    topo = plan.topology
    comps = tuple(replace(c, par=3, config={"topology.component.state.rescale": "merge"}) if c.name == "letters"
                  else c for c in topo.components)
    topo3 = replace(topo, components=comps)
    plan3 = PhysicalPlan(topo3, round_robin(topo3, 1), plan.stmgrs, TopologyState.RUNNING, 1)
    for i in range(3):
        t = _Task(plan3, "letters", storage, i)
        t.rt.restore(1, 7)
        [done] = t.report(MsgType.STATE_RESTORED, pb.StateRestored)
        assert done.ok, done.error
        assert t.rt.state.get("pos") == {"a": 1, "b": 2}


def test_a_live_rescale_restores_a_kept_task_in_place_on_the_new_plans_channels_and_a_removed_one_ignores_it(
        storage):
    """Effectively once, a live rescale switches every task's plan in place, then every task
    restores: a kept bolt aligns markers over the new plan's input channels (a spout task added)
    and takes its key groups' share of the checkpoint; a task the plan dropped has no share and
    sends no report (it exits when its executor stops it)."""
    from dataclasses import replace

    from heron_py.planner.packing import repack

    plan = _keyed_plan(3)
    bolts = [_Task(plan, "count", storage, i) for i in range(3)]
    spouts = plan.packing.tasks_of("letters")
    words = [f"w{i}" for i in range(100)]
    for b in bolts:
        b.rt.restore(1, 0)
        b.take(MsgType.STATE_RESTORED)
        assert b.rt.aligner is not None and b.rt.aligner.channels == frozenset(spouts)
        b.rt.start_processing(1)
        b.host.user.counts.update({w: 1 for w in words if make_router(
            Grouping.fields("w"), target_tasks=plan.packing.tasks_of("count"), local_tasks=frozenset(),
            field_indices=(0,)).choose([w]) == (b.task_id,)})
        b.rt._save(7)
        b.sent.clear()
    storage.mark_complete("eo", 7, plan.packing.tasks_of("count"),
                          packing_of({t.task_id: t.component for t in plan.packing.tasks}))
    topo = plan.topology
    grown = replace(topo, components=tuple(replace(c, par={"letters": 3, "count": 2}[c.name])
                                           for c in topo.components))
    new = PhysicalPlan(grown, repack(plan.packing, grown), plan.stmgrs, TopologyState.RUNNING, 2)
    added_spout = sorted(set(new.packing.tasks_of("letters")) - set(spouts))
    assert len(added_spout) == 1
    for b in bolts:
        b.host.set_plan(new)
        b.rt.restore(2, 7)
    kept, removed = bolts[:2], bolts[2]
    assert removed.host.removed and removed.sent == [] and removed.rt.restore_id == 1
    router = make_router(Grouping.fields("w"), target_tasks=new.packing.tasks_of("count"), local_tasks=frozenset(),
                         field_indices=(0,))
    got: dict[str, int] = {}
    for b in kept:
        [done] = b.report(MsgType.STATE_RESTORED, pb.StateRestored)
        assert done.ok and done.restore_id == 2, done.error
        assert b.rt.aligner is not None and b.rt.aligner.channels == frozenset(new.packing.tasks_of("letters"))
        assert all(router.choose([w]) == (b.task_id,) for w in b.host.user.counts)
        got.update(b.host.user.counts)
    assert got == {w: 1 for w in words}
    # the added spout's marker is aligned like the others: a checkpoint completes only with it
    b = kept[0]
    b.rt.start_processing(2)
    for s in spouts:
        b.rt.on_marker(encode_marker(b.task_id, s, 8))
    assert b.host.user.saved_ids == []  # a restore made a new component: its saves start afresh
    b.rt.on_marker(encode_marker(b.task_id, added_spout[0], 8))
    assert b.host.user.saved_ids == ["8"]
