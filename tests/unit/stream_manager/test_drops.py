"""A stream manager without a plan holds (bounded) what its instances send and routes it when
the plan comes; every drop that can still happen is exported as ``__dropped-tuples/<reason>``
(issue 18, defect 4)."""

import logging
from types import SimpleNamespace

from heron_py.common.framing import MsgType, encode_batch_frame
from heron_py.common.metric_names import split_name
from heron_py.common.net import Counters
from stream_manager.backpressure import BackpressureState, ConnKey
from stream_manager.forwarder import DropReason, Forwarder
from stream_manager.metrics import StreamManagerMetrics
from stream_manager.routing import RoutingTable
from tests.fakes import FakeConn, FakeDestinations, word_count_plan

LOG = logging.getLogger("test-sm-drops")


def batch(dest, count=3, body=b"tuples"):
    return encode_batch_frame(dest, 1, body, MsgType.TUPLE_BATCH, count)


def test_frames_before_the_plan_are_held_and_routed_when_it_comes():
    dests = FakeDestinations()
    fwd = Forwarder(dests, on_ack_batch=lambda f: None, log=LOG)
    inst = dests.instances[3] = FakeConn()  # registered before the plan came
    local, remote = batch(3, 4), batch(2, 5)  # task 3 is in container 0, task 2 in container 1
    fwd.route(local)
    fwd.route(remote)
    assert inst.sent == [] and fwd.dropped_tuples == 0 and fwd.held_frames() == 2
    fwd.set_routing(RoutingTable.build(word_count_plan(), 0))
    assert inst.sent == [local]
    assert list(fwd.held[ConnKey.stmgr(1)]) == [remote]  # its peer is not connected yet
    assert fwd.dropped_tuples == 0 and fwd.unplanned_bytes == 0


def test_what_overflows_the_pre_plan_bound_is_dropped_and_counted_by_reason():
    dests = FakeDestinations()
    f = batch(3, 7, b"x" * 100)
    fwd = Forwarder(dests, on_ack_batch=lambda f: None, log=LOG, max_unplanned_bytes=3 * len(f))
    for _ in range(5):
        fwd.route(f)
    assert fwd.unplanned_bytes == 3 * len(f)
    assert fwd.drops[DropReason.NO_PLAN_OVERFLOW] == 14 and fwd.dropped_frames == 2


def test_every_drop_reason_is_exported_as_dropped_tuples_with_a_reason_label():
    dests = FakeDestinations()
    fwd = Forwarder(dests, on_ack_batch=lambda f: None, log=LOG, max_held=1)
    fwd.set_routing(RoutingTable.build(word_count_plan(), 0))
    fwd.route(batch(99, 2))  # unknown task
    fwd.route(batch(3, 5))
    fwd.route(batch(3, 6))  # task 3 is not connected: the first held batch is dropped
    fake = SimpleNamespace(conns={}, peers={}, pending=0, metrics={}, rate_pauses={})
    m = StreamManagerMetrics(container=0, bp=BackpressureState(clock=lambda: 0.0), forwarder=fwd, acks=fake,
                             instances=fake, clique=fake, counters=Counters(), spouts_held=lambda: False,
                             process=lambda: {})
    counters = m.report()["counters"]
    dropped = {k: v for k, v in counters.items() if k.startswith("__dropped-tuples")}
    expected = {f"__dropped-tuples/{r.value}": 0 for r in DropReason}  # every reason, zeros too
    expected.update({"__dropped-tuples/held-overflow": 5, "__dropped-tuples/unknown-task": 2})
    assert dropped == expected
    assert split_name("__dropped-tuples/held-overflow") == ("__dropped-tuples", {"reason": "held-overflow"})
    assert m.for_master().dropped_tuples == 7


def test_frames_held_for_a_down_task_are_bounded_in_bytes_and_counted():
    dests = FakeDestinations()
    fwd = Forwarder(dests, on_ack_batch=lambda f: None, log=logging.getLogger("t"), max_held_bytes=10_000,
                    max_held_total_bytes=15_000)
    fwd.set_routing(RoutingTable.build(word_count_plan(), 0))
    big = encode_batch_frame(3, 1, b"z" * 3000, MsgType.TUPLE_BATCH, 10)
    for _ in range(10):  # task 3 is down: 30 KB of frames, few enough for the count bound
        fwd.route(big)
    assert fwd.held_bytes[ConnKey.task(3)] <= 10_000 and len(fwd.held[ConnKey.task(3)]) == 3
    assert fwd.drops[DropReason.HELD_OVERFLOW] == 70
    # a second destination: the total bound takes from the destination that grows
    other = encode_batch_frame(2, 1, b"z" * 3000, MsgType.TUPLE_BATCH, 10)
    for _ in range(3):
        fwd.route(other)
    assert fwd.held_total_bytes <= 15_000
    conn = dests.instances[3] = FakeConn()
    fwd.release(ConnKey.task(3), conn)
    assert conn.sent == [big] * 3 and fwd.held_total_bytes == sum(len(f) for f in fwd.held[ConnKey.stmgr(1)])


def test_held_bytes_follow_the_high_watermark_with_a_floor_and_are_a_gauge():
    """Twice the high watermark is kept per destination (at least 32 MiB, what may still be on
    its way whatever the watermark), twice that in all; the metrics report what is held."""
    mib = 1024 * 1024
    frame = encode_batch_frame(3, 1, b"z" * (mib - 64), MsgType.TUPLE_BATCH, 1)
    for high, per_dest in ((40 * mib, 80 * mib), (mib, 32 * mib)):
        fwd = Forwarder(FakeDestinations(), on_ack_batch=lambda f: None, log=LOG)
        fwd.set_routing(RoutingTable.build(word_count_plan(), 0))
        fwd.held_high = high  # as each plan sets it
        assert fwd.held_bound() == per_dest
        for _ in range(per_dest // mib + 8):  # task 3 is down
            fwd.route(frame)
        assert per_dest - len(frame) < fwd.held_bytes[ConnKey.task(3)] <= per_dest
        assert fwd.drops[DropReason.HELD_OVERFLOW] == 8
        fake = SimpleNamespace(conns={}, peers={}, pending=0, metrics={}, rate_pauses={})
        m = StreamManagerMetrics(container=0, bp=BackpressureState(clock=lambda: 0.0), forwarder=fwd, acks=fake,
                                 instances=fake, clique=fake, counters=Counters(), spouts_held=lambda: False,
                                 process=lambda: {})
        assert m.report()["gauges"]["__held-bytes"] == fwd.held_bytes[ConnKey.task(3)]
    # all destinations together: twice one's bound
    fwd = Forwarder(FakeDestinations(), on_ack_batch=lambda f: None, log=LOG)
    fwd.set_routing(RoutingTable.build(word_count_plan(), 0))
    fwd.held_high = mib
    for dest in (3, 1, 2):  # three destinations down (tasks 3 and 1 here, the peer of task 2), 32 MiB each
        f = encode_batch_frame(dest, 1, b"z" * (mib - 64), MsgType.TUPLE_BATCH, 1)
        for _ in range(32):
            fwd.route(f)
    assert 64 * mib - mib < fwd.held_total_bytes <= 64 * mib
    assert fwd.drops[DropReason.HELD_OVERFLOW] > 31
