"""The master's time-windowed aggregates (topology_master/metrics_windows.py), on a fake clock."""

from typing import Any

import pytest

from heron_py.planner.model import (
    ComponentDef,
    ComponentKind,
    GroupingDef,
    GroupingKind,
    InputDef,
    PickledRef,
    StreamDef,
    TopologyDef,
)
from tests.fakes import ManualClock
from topology_master.metrics_windows import MetricsWindows, WindowError, fanout_of

T0 = 1_700_000_000.0




def _windows(clock: ManualClock) -> MetricsWindows:
    return MetricsWindows({"spout": "spout", "bolt": "bolt"}, {("spout", "default"): 2}, clock)


def _spout(t: float, emitted: int, acked: int, p50: float = 4.0, cpu: float = 1.0) -> dict[str, Any]:
    return {"kind": "instance", "component": "spout", "task": 1, "time": t,
            "counters": {"__emit-count/default": emitted, "__ack-count": acked, "__fail-count": 0},
            "gauges": {"__complete-latency-ms/p50": p50},
            "process": {"cpu_seconds": cpu, "rss_bytes": 50e6}}


def _bolt(t: float, executed: int, mean_ms: float, task: int = 2) -> dict[str, Any]:
    return {"kind": "instance", "component": "bolt", "task": task, "time": t,
            "counters": {"__execute-count/spout/default": executed, "__ack-count": executed},
            "gauges": {"__execute-latency-ms": mean_ms}}


def test_first_report_counts_from_zero_so_early_emits_are_not_lost() -> None:
    clock = ManualClock(T0)
    w = _windows(clock)
    w.observe(_spout(T0, emitted=1000, acked=900))
    clock.now = T0 + 5
    row = w.component_rows("600")["spout"]
    assert (row["emitted"], row["transferred"], row["acked"]) == (1000, 2000, 900)
    assert w.series("spout", "emitted", "600") == [(T0 - 1, T0, 1000.0)]  # a first report's lump: the 1 s before
    w.observe(_spout(T0 + 4, emitted=1400, acked=1300))
    # the 10 s bucket still filling, 4 s covered by reports: 1400 / 4 (not / 10, a false drop)
    assert w.series("spout", "emitted", "600") == [(T0, T0 + 4, 350.0)]
    # the next report lands in the next bucket, with the 8 s since the last one: 600 / 8
    w.observe(_spout(T0 + 12, emitted=2000, acked=1900))
    assert w.series("spout", "emitted", "600") == [(T0, T0 + 4, 350.0), (T0 + 4, T0 + 12, 75.0)]


def test_increases_restarts_and_windows() -> None:
    clock = ManualClock(T0)
    w = _windows(clock)
    w.observe(_spout(T0, 100, 100))
    w.observe(_spout(T0 + 700, 300, 300))  # +200, eleven minutes later
    w.observe(_spout(T0 + 710, 50, 50))  # restarted: the new total is the increase
    clock.now = T0 + 720
    assert w.component_rows("600")["spout"]["emitted"] == 250  # the first 100 are out of 10 min
    assert w.component_rows("10800")["spout"]["emitted"] == 350
    assert w.component_rows("all")["spout"]["emitted"] == 350
    assert w.task_rows("all")[1]["process_started"] == T0 + 710
    w.observe(_spout(T0 + 705, 999, 999))  # late: older than the last report, ignored
    assert w.component_rows("all")["spout"]["emitted"] == 350


def test_latencies_are_weighted_and_capacity_is_storms() -> None:
    clock = ManualClock(T0)
    w = _windows(clock)
    w.observe(_bolt(T0, 0, 0.0))
    w.observe(_bolt(T0 + 100, 1000, 2.0))  # 2000 ms executing
    w.observe(_bolt(T0 + 200, 3000, 3.0))  # mean 3 over 3000: 9000 ms in total, 7000 ms more
    w.observe(_bolt(T0 + 200, 1000, 1.0, task=3))
    clock.now = T0 + 200
    rows = w.task_rows("600")
    assert rows[2]["execute_latency_ms"] == 3.0 and rows[2]["executed"] == 3000
    assert rows[2]["capacity"] == pytest.approx(9000 / 200_000, abs=1e-3)  # observed 200 s of the 600
    comp = w.component_rows("600")["bolt"]
    assert comp["executed"] == 4000 and comp["execute_latency_ms"] == 2.5  # (9000 + 1000) / 4000
    assert comp["capacity"] == rows[2]["capacity"]  # the busiest task's
    assert comp["acked"] == 4000


def test_process_latency_is_the_acks_weighted_mean() -> None:
    clock = ManualClock(T0)
    w = _windows(clock)

    def bolt(t: float, acked: int, mean_ms: float) -> dict[str, Any]:
        r = _bolt(t, acked, 1.0)
        r["gauges"]["__process-latency-ms"] = mean_ms
        return r

    w.observe(bolt(T0, 1000, 4.0))  # 4000 ms over the first 1000 acks
    w.observe(bolt(T0 + 10, 3000, 2.0))  # 6000 ms in total since the start: 2000 ms over 2000 more
    clock.now = T0 + 10
    assert w.component_rows("600")["bolt"]["process_latency_ms"] == 2.0
    assert w.task_rows("600")[2]["process_latency_ms"] == 2.0
    assert [v for _, _, v in w.series("bolt", "process_ms", "600")] == [4.0, 1.0]
    w.observe(bolt(T0 + 20, 10, 8.0))  # restarted: 80 ms over its 10 acks
    clock.now = T0 + 20
    assert w.component_rows("600")["bolt"]["process_latency_ms"] == round((6000 + 80) / 3010, 3)
    assert "process_latency_ms" not in w.component_rows("600").get("spout", {})


def test_complete_latency_and_cpu() -> None:
    clock = ManualClock(T0)
    w = _windows(clock)
    w.observe(_spout(T0, 100, 100, p50=10.0, cpu=1.0))
    w.observe(_spout(T0 + 10, 400, 400, p50=20.0, cpu=6.0))
    row = w.component_rows("all")["spout"]
    assert row["complete_latency_ms"] == pytest.approx((100 * 10 + 300 * 20) / 400)
    task = w.task_rows("all")[1]
    assert task["cpu_percent"] == 50.0 and task["rss_bytes"] == 50e6


def test_memory_is_bounded_and_unknown_components_ignored() -> None:
    clock = ManualClock(T0)
    w = _windows(clock)
    for i in range(20_000):  # 2 days of reports every 10 s
        w.observe(_spout(T0 + 10 * i, i, i))
    w.observe({"kind": "instance", "component": "ghost", "task": 9, "time": T0})
    assert list(w.tasks) == [1]
    assert [len(ring) for ring in w.tasks[1].buckets] == [61, 61, 61]
    clock.now = T0 + 10 * 19_999
    assert w.component_rows("600")["spout"]["emitted"] == 60  # one per report, 10 min of 10 s reports


def test_bad_window_is_one_clear_error() -> None:
    with pytest.raises(WindowError, match=r"^parameter window: expected one of 600, 10800, 86400, all "
                                          r"\(seconds, or all\), found '5'$"):
        _windows(ManualClock(T0)).component_rows("5")


def test_fanout_counts_all_groupings_per_task() -> None:
    spout = ComponentDef("s", ComponentKind.SPOUT, PickledRef(b""), "m:S", 1, (), (StreamDef("default", ("n",)),))
    a = ComponentDef("a", ComponentKind.BOLT, PickledRef(b""), "m:A", 3,
                     (InputDef("s", "default", GroupingDef(GroupingKind.ALL, ())),), ())
    b = ComponentDef("b", ComponentKind.BOLT, PickledRef(b""), "m:B", 2,
                     (InputDef("s", "default", GroupingDef(GroupingKind.SHUFFLE, ())),), ())
    assert fanout_of(TopologyDef("t", (spout, a, b))) == {("s", "default"): 4}
