"""The forwarder's policy with fake connections: where a frame goes, when it is held, released,
or dropped, and what is counted."""

import logging

from heron_py.common.framing import ACK_INIT, ACK_RECORD, MsgType, encode_batch_frame
from stream_manager.backpressure import ConnKey
from stream_manager.forwarder import DropReason, Forwarder
from stream_manager.routing import RoutingTable
from tests.fakes import FakeConn, FakeDestinations, word_count_plan

LOG = logging.getLogger("test-forwarder")






def make(container=0, drop=False, max_held=4096):
    dests = FakeDestinations()
    acks = []
    fwd = Forwarder(dests, on_ack_batch=acks.append, log=LOG, max_held=max_held)
    # container 0: tasks 1 (spout), 3; container 1: 2, 4, 5
    fwd.routing = RoutingTable.build(word_count_plan(), container)
    fwd.drop_on_backpressure = drop
    return fwd, dests, acks


def batch(dest, count=3, body=b"tuples", msg_type=MsgType.TUPLE_BATCH):
    return encode_batch_frame(dest, 1, body, msg_type, count)


def test_a_local_tasks_batch_goes_to_its_instance_and_is_counted():
    fwd, dests, _ = make()
    inst = dests.instances[3] = FakeConn()
    f = batch(3, count=5)
    fwd.route(f)
    assert inst.sent == [f]
    assert fwd.tuples_out == {ConnKey.task(3): 5}


def test_another_containers_task_goes_to_that_peer():
    fwd, dests, _ = make()
    peer = dests.peers[1] = FakeConn()
    dests.instances[3] = FakeConn()
    fwd.route(batch(4, count=2))
    fwd.route(batch(5, count=1))
    assert len(peer.sent) == 2 and dests.instances[3].sent == []
    assert fwd.tuples_out == {ConnKey.stmgr(1): 3}


def test_frames_are_held_while_nobody_is_connected_then_released_in_order():
    fwd, dests, _ = make()
    frames = [batch(3, body=bytes([i])) for i in range(5)]
    peer_frames = [batch(4, body=bytes([i])) for i in range(2)]
    for f in frames:
        fwd.route(f)
    for f in peer_frames:
        fwd.route(f)
    assert fwd.held_frames() == 7 and fwd.tuples_out == {}
    inst = dests.instances[3] = FakeConn()
    fwd.release(ConnKey.task(3), inst)
    assert inst.sent == frames and inst.send_many_calls == 1  # one write for the whole backlog
    assert fwd.held_frames() == 2  # the peer's stay held until it connects
    peer = dests.peers[1] = FakeConn()
    fwd.release(ConnKey.stmgr(1), peer)
    assert peer.sent == peer_frames and fwd.held_frames() == 0
    fwd.release(ConnKey.stmgr(1), peer)  # nothing left: nothing sent again
    assert peer.send_many_calls == 1
    # once connected, frames go straight through
    fwd.route(frames[0])
    assert inst.sent == [*frames, frames[0]]


def test_held_frames_are_bounded_the_oldest_dropped_and_counted():
    fwd, dests, _ = make(max_held=3)
    frames = [batch(3, count=10 + i, body=bytes([i])) for i in range(5)]
    for f in frames:
        fwd.route(f)
    assert fwd.held_frames() == 3
    assert fwd.dropped_frames == 2 and fwd.dropped_tuples == 10 + 11
    inst = dests.instances[3] = FakeConn()
    fwd.release(ConnKey.task(3), inst)
    assert inst.sent == frames[2:]


def test_drop_policy_drops_tuple_batches_to_a_paused_connection_in_droptuples_mode():
    fwd, dests, _ = make(drop=True)
    inst = dests.instances[3] = FakeConn()
    peer = dests.peers[1] = FakeConn()
    inst.writing_paused = peer.writing_paused = True
    fwd.route(batch(3, count=4))
    fwd.route(batch(4, count=6))
    assert inst.sent == [] and peer.sent == []
    assert fwd.dropped_tuples == 10 and fwd.dropped_frames == 0 and fwd.tuples_out == {}
    # only tuple batches: an ack batch for a spout of another container still goes out
    ack = batch(2, count=1, msg_type=MsgType.ACK_BATCH)
    fwd.route(ack)
    assert peer.sent == [ack]
    # a connection that is not paused gets its tuples
    inst.writing_paused = False
    fwd.route(batch(3, count=4))
    assert len(inst.sent) == 1 and fwd.dropped_tuples == 10


def test_without_droptuples_mode_a_paused_connection_still_gets_everything():
    fwd, dests, _ = make(drop=False)
    inst = dests.instances[3] = FakeConn()
    inst.writing_paused = True  # backpressure pauses the spouts instead
    fwd.route(batch(3, count=4))
    assert len(inst.sent) == 1 and fwd.dropped_tuples == 0 and fwd.tuples_out == {ConnKey.task(3): 4}


def test_a_task_the_plan_does_not_have_is_dropped_and_counted():
    fwd, dests, acks = make()
    dests.instances[3] = FakeConn()
    dests.peers[1] = FakeConn()
    fwd.route(batch(99, count=7))
    assert fwd.dropped_frames == 1 and fwd.held_frames() == 0 and acks == []
    assert dests.instances[3].sent == [] and dests.peers[1].sent == []


def test_an_ack_batch_for_a_local_spout_goes_to_the_ack_callback():
    fwd, dests, acks = make()
    spout = dests.instances[1] = FakeConn()
    ack = encode_batch_frame(1, 3, ACK_RECORD.pack(ACK_INIT, 42, 7), MsgType.ACK_BATCH, 1)
    fwd.route(ack)
    assert acks == [ack] and spout.sent == [] and fwd.tuples_out == {}
    # a tuple batch for the same spout task is an ordinary delivery
    fwd.route(batch(1, count=1))
    assert len(spout.sent) == 1 and acks == [ack]


def test_results_for_a_spout_are_held_until_it_connects_and_never_dropped():
    fwd, dests, _ = make(drop=True)
    result = encode_batch_frame(1, 0, b"r", MsgType.ACK_RESULT, 1)
    fwd.send_to_task(1, result)
    assert fwd.held_frames() == 1
    spout = dests.instances[1] = FakeConn()
    spout.writing_paused = True
    fwd.release(ConnKey.task(1), spout)
    fwd.send_to_task(1, result)
    assert spout.sent == [result, result] and fwd.dropped_tuples == 0


def test_an_ack_batch_for_a_local_task_that_is_not_a_spout_is_dropped():
    fwd, dests, acks = make()
    bolt = dests.instances[3] = FakeConn()
    fwd.route(batch(3, count=1, msg_type=MsgType.ACK_BATCH))
    assert acks == [] and bolt.sent == [] and fwd.dropped_frames == 1


def test_frames_held_above_the_high_watermark_count_as_backpressure_until_released():
    """A spout that starts before its bolt's instance registered: the held frames make that
    destination slow (spouts pause) instead of filling the hold bound, which drops."""
    fwd, _dests, _ = make()
    events = []
    fwd.on_held = lambda key, high: events.append((key, high, len(conn.sent)))
    fwd.held_high = 100
    conn = FakeConn()
    for _ in range(3):
        fwd.route(batch(3, body=b"x" * 40))  # 58-byte frames: above 100 bytes at the second
    assert events == [(ConnKey.task(3), True, 0)]
    assert fwd.dropped_tuples == 0
    fwd.release(ConnKey.task(3), conn)
    # low before the held frames go out: the connection's own buffer then decides
    assert events[-1] == (ConnKey.task(3), False, 0) and len(conn.sent) == 3
    fwd.route(batch(4, body=b"y"))  # another destination, under the mark: nothing
    assert len(events) == 2


def test_a_batch_for_a_task_a_rescale_removed_reaches_it_while_it_runs_then_is_dropped():
    """Sent under the old plan and in flight at a live rescale's switch: a batch for a removed
    task goes to it while it still runs (it processes its leftovers before it exits), through
    its container's stream manager; once it is gone, it is dropped and counted. An ack batch is
    not routed that way (acks go to a spout of the plan)."""
    import dataclasses

    plan = word_count_plan()
    shrunk = dataclasses.replace(plan, packing=dataclasses.replace(
        plan.packing, tasks=tuple(t for t in plan.packing.tasks if t.task_id not in (3, 5))))
    fwd, dests, _ = make(container=0)
    fwd.set_routing(RoutingTable.build(shrunk, 0))  # 3 (here) and 5 (container 1) removed
    removed = dests.instances[3] = FakeConn()
    peer = dests.peers[1] = FakeConn()
    here, there = batch(3, count=2), batch(5, count=4)
    fwd.route(here)
    fwd.route(there)
    assert removed.sent == [here] and peer.sent == [there]
    del dests.instances[3]  # it exited
    fwd.route(batch(3, count=1))
    fwd.route(batch(3, count=6, msg_type=MsgType.ACK_BATCH))
    fwd.route(batch(9, count=7))  # never in any plan
    assert fwd.drops[DropReason.UNKNOWN_TASK] == 1 + 6 + 7


class Holding:
    """A local instance's connection holding back frames its transport has no room for."""

    def __init__(self, frames):
        self.frames = list(frames)

    def drop_held(self, is_dropped):
        dropped = [f for f in self.frames if is_dropped(f)]
        self.frames = [f for f in self.frames if not is_dropped(f)]
        return dropped


def test_a_restore_drops_the_old_runs_batches_and_markers_held_here_and_held_back_by_instances():
    """Effectively once: what a restore rolls back goes, from both places, counted as the
    restore's; acks and results stay (a slow bolt's restore no longer waits behind them)."""
    fwd, _dests, _ = make()
    marker = batch(3, count=0, msg_type=MsgType.CKPT_MARKER)
    result = batch(1, count=1, msg_type=MsgType.ACK_RESULT)
    fwd.route(batch(3, count=4))  # task 3 not connected: held here
    fwd.hold(ConnKey.task(3), result)
    inst = Holding([batch(3, count=2), marker, result, batch(3, count=5)])
    assert fwd.discard_old_run([inst]) == 4  # 3 held back by the instance's connection, 1 here
    assert inst.frames == [result]
    assert list(fwd.held[ConnKey.task(3)]) == [result]
    assert fwd.drops[DropReason.OLD_RUN] == 4 + 2 + 5  # tuples: the marker counts none
    assert fwd.held_bytes[ConnKey.task(3)] == len(result) and fwd.held_total_bytes == len(result)

    # before the first plan: what is held unplanned, the same way
    early = Forwarder(FakeDestinations(), log=LOG)
    early.route(batch(3, count=6))
    early.route(result)
    assert early.discard_old_run() == 1
    assert list(early.unplanned) == [result] and early.unplanned_bytes == len(result)
    assert early.drops[DropReason.OLD_RUN] == 6
