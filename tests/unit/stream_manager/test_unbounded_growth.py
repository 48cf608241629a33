"""Issue 18, defect 6: the metrics manager's exception store and seen ids, and the frames a
stream manager holds for a down destination, are bounded in bytes, with counts of what went."""

import json
import logging

from heron_py.common.framing import MsgType, encode_batch_frame
from metrics_manager import store as store_mod
from metrics_manager.store import MetricsStore
from stream_manager.backpressure import ConnKey
from stream_manager.forwarder import DropReason, Forwarder
from stream_manager.routing import RoutingTable
from tests.unit.stream_manager.test_forwarder import FakeConn, FakeDestinations
from tests.unit.stream_manager.test_routing import plan


def _report(i, trace, eid):
    return {"kind": "instance", "task": 1, "component": "c", "time": float(i),
            "exceptions": [{"id": eid, "trace": trace, "time": float(i)}]}


def test_the_exception_store_stays_under_its_byte_bound_and_counts_what_it_forgot():
    s = MetricsStore("t", 0)
    for i in range(5000):  # 5000 distinct 1 KB traces: 5 MB unbounded
        s.update(_report(i, f"Traceback {i}\n" + "x" * 1000, f"id-{i}"))
    sent = json.dumps(s.exception_list())
    assert len(sent) < store_mod.MAX_EXCEPTION_BYTES * 1.2
    assert s.exceptions_dropped == 5000 - len(s.exceptions) > 0
    # the newest are kept
    assert any(r["stacktrace"].startswith("Traceback 4999\n") for r in s.exception_list())
    samples = {m: v for m, _, v, _ in s.samples() if m == "__exceptions-dropped"}
    assert samples == {"__exceptions-dropped": float(s.exceptions_dropped)}


def test_one_huge_trace_is_clipped_to_its_head_and_tail():
    s = MetricsStore("t", 0)
    s.update(_report(0, "HEAD" + "y" * 1_000_000 + "TAIL", "id"))
    [rec] = s.exception_list()
    assert len(rec["stacktrace"]) < store_mod.MAX_TRACE_CHARS + 100
    assert rec["stacktrace"].startswith("HEAD") and rec["stacktrace"].endswith("TAIL")


def test_seen_ids_are_bounded_in_bytes_and_a_repeat_is_still_counted_once():
    s = MetricsStore("t", 0)
    for i in range(20000):
        s.update(_report(i, "same trace", f"an-exception-id-{i:08d}"))
    assert sum(len(k) for k in s._seen_exception_ids) <= store_mod.MAX_SEEN_ID_BYTES
    assert s.exception_ids_forgotten > 0
    s.update(_report(20000, "same trace", "an-exception-id-00019999"))  # the last report repeated
    [rec] = s.exception_list()
    assert rec["count"] == 20000


def test_frames_held_for_a_down_task_are_bounded_in_bytes_and_counted():
    dests = FakeDestinations()
    fwd = Forwarder(dests, on_ack_batch=lambda f: None, log=logging.getLogger("t"), max_held_bytes=10_000,
                    max_held_total_bytes=15_000)
    fwd.set_routing(RoutingTable.build(plan(), 0))
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
