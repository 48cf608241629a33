"""The metrics manager's store: Prometheus output parsed back by prometheus-client's parser,
exceptions counted once per occurrence, hostile reports rejected with one clear error."""

import json

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from metrics_manager.prom import registry_for
from metrics_manager.store import MetricsStore, ReportError, parse_report


def _report(task, emitted, executed, exc=()):
    return {"kind": "instance", "task": task, "component": "split", "time": 100.0 + task,
            "counters": {"__emit-count/default": emitted, "__execute-count/sentence/default": executed,
                         "__ack-count": 0},
            "gauges": {"__execute-latency-ms": 0.25, "__complete-latency-ms/p99": 3.5},
            "process": {"cpu_seconds": 1.5, "rss_bytes": 4096, "threads": 3, "open_fds": 9},
            "user": {"seen": 7, "parity": {"odd": 3, "even": 4}}, "exceptions": list(exc)}


def test_prometheus_text_parses_back():
    store = MetricsStore("wc", 1)
    store.update(_report(2, 1000, 100))
    store.update(_report(3, 2000, 200))
    store.update({"kind": "stmgr", "container": 1, "time": 101.0,
                  "counters": {"__bytes-out/task 2": 5000, "__time_spent_back_pressure_ms": 12},
                  "gauges": {"__in-backpressure": 0}, "process": {"rss_bytes": 1}})
    store.restarts = {"split-2": 1}
    text = generate_latest(registry_for(lambda: store)).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    emit = fams["heron_emit_count"]
    assert emit.type == "counter"
    got = {(s.labels["task"], s.labels["stream"]): s.value for s in emit.samples if s.name.endswith("_total")}
    assert got == {("2", "default"): 1000.0, ("3", "default"): 2000.0}
    s0 = next(s for s in emit.samples if s.name.endswith("_total"))
    assert s0.labels["topology"] == "wc" and s0.labels["component"] == "split" and s0.labels["container"] == "1"
    ex = [s for s in fams["heron_execute_count"].samples if s.name.endswith("_total")]
    assert {(s.labels["source"], s.labels["stream"], s.value) for s in ex} == {
        ("sentence", "default", 100.0), ("sentence", "default", 200.0)}
    assert fams["heron_execute_latency_ms"].type == "gauge"
    assert {s.labels["key"] for s in fams["heron_complete_latency_ms"].samples} == {"p99"}
    assert [s.value for s in fams["heron_restarts"].samples if s.name.endswith("_total")] == [1.0]
    assert {s.labels.get("key"): s.value for s in fams["heron_user_parity"].samples
            if s.labels["task"] == "2"} == {"odd": 3.0, "even": 4.0}
    out = [s for s in fams["heron_bytes_out"].samples if s.name.endswith("_total")]
    assert [(s.labels["key"], s.labels["task"], s.value) for s in out] == [("task 2", "stmgr", 5000.0)]
    assert fams["heron_process_rss_bytes"].samples


def test_exceptions_are_counted_once_each():
    store = MetricsStore("wc", 0)
    e1 = {"id": "a", "trace": "Traceback ...\nValueError: x", "time": 5.0}
    store.update(_report(2, 1, 1, [e1]))
    store.update(_report(2, 2, 2, [e1]))  # the same exception repeated in the next report
    e2 = {"id": "b", "trace": "Traceback ...\nValueError: x", "time": 9.0}
    store.update(_report(2, 3, 3, [e2]))  # the restarted task died the same way again
    assert store.exception_list() == [{"task": 2, "component": "split", "stacktrace": "Traceback ...\nValueError: x",
                                       "count": 2, "firsttime": 5.0, "lasttime": 9.0}]
    line = json.loads(store.sink_line(10.0))
    assert line["container"] == 0 and len(line["reports"]) == 1


@pytest.mark.parametrize("raw, message", [
    (b"{nope", "metrics report: expected a JSON object, found invalid JSON (Expecting property name enclosed in "
               "double quotes: line 1 column 2 (char 1))"),
    (b"[1]", "metrics report: expected a JSON object, found list"),
    (b'{"kind": "spy"}', "metrics report: expected kind 'instance', 'stmgr' or 'tmanager', found 'spy'"),
    (b'{"kind": "stmgr", "counters": 3}', "metrics report: expected 'counters' to be an object, found int"),
])
def test_hostile_reports(raw, message):
    with pytest.raises(ReportError) as e:
        parse_report(raw)
    assert str(e.value) == message


def test_the_metrics_managers_own_refusals_are_exported(tmp_path, caplog):
    """A report the metrics manager could not read is dropped with a line and counted, and the
    count reaches Prometheus (it was counted and never exported), with its refused connections."""
    import logging

    from heron_py.common.container_layout import TopologyPaths
    from heron_py.state import LocalFsStateManager
    from metrics_manager.main import MetricsManager

    mm = MetricsManager(topology="wc", container=2, secret=b"s" * 32, state=LocalFsStateManager(tmp_path),
                        paths=TopologyPaths.of("wc", tmp_path), log=logging.getLogger("test.mm"))
    with caplog.at_level(logging.WARNING, "test.mm"):
        mm.on_report(b"[1]", "task 7")
        mm.on_report(b'{"kind": "spy"}', "task 7")
    assert caplog.messages == [
        "metrics report: expected a JSON object, found list (from task 7); dropped",
        "metrics report: expected kind 'instance', 'stmgr' or 'tmanager', found 'spy' (from task 7); dropped"]
    mm.counters.shed = 3
    text = generate_latest(registry_for(lambda: mm.store)).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    [bad] = [s for s in fams["heron_bad_reports"].samples if s.name.endswith("_total")]
    assert bad.value == 2.0 and bad.labels["component"] == "__metricsmgr__" and bad.labels["container"] == "2"
    [shed] = fams["heron_connections_shed"].samples
    assert shed.value == 3.0 and shed.labels["task"] == "metricsmgr"


def test_a_topology_masters_report_is_exported_under_its_own_labels():
    store = MetricsStore("wc", 0)
    store.update(parse_report(json.dumps({"kind": "tmanager", "time": 5.0, "gauges": {
        "__checkpoint-failing": 0.0, "__checkpoint-waiting-for-operator": 1.0}}).encode()))
    text = generate_latest(registry_for(lambda: store)).decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    [s] = fams["heron_checkpoint_waiting_for_operator"].samples
    assert s.value == 1.0 and (s.labels["component"], s.labels["task"], s.labels["container"]) == (
        "__tmanager__", "tmanager", "0")
    assert store.source_key({"kind": "tmanager"}) == "tmanager"
