"""The metrics manager's exception store and its seen ids are bounded in bytes, with counts of
what went (metrics_manager/store.py; issue 18, defect 6)."""

import json

from metrics_manager import store as store_mod
from metrics_manager.store import MetricsStore


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


