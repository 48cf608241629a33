"""The health manager's steps as Prometheus series (metrics_manager/prom.py ``AutoscaleCollector``,
store.py ``AutoscaleTally``): read from the record ``heron-py autoscale`` appends to, at each
scrape; counters from the collector's making, gauges from the record's last steps too."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from heron_py.cli.autoscale_log import LOG_FILE
from metrics_manager.prom import AutoscaleCollector, autoscale_collector, registry_for
from metrics_manager.store import AutoscaleTally, MetricsStore, asked_parallelism, step_action
from tests.unit.autoscale_steps import Recorder, four_steps


def _scrape(store: MetricsStore, collector: AutoscaleCollector | None) -> dict[str, dict[tuple[tuple[str, str], ...],
                                                                                          float]]:
    """Prometheus text as {sample name: {sorted labels: value}}, for the autoscale families."""
    text = generate_latest(registry_for(lambda: store, collector)).decode()
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("heron_autoscale_") and not s.name.endswith("_created"):
                out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def _labels(**kv: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"topology": "wc", **kv}.items()))


ZERO_ACTIONS = {_labels(action=a, outcome=o): 0.0 for a, o in (
    ("update", "done"), ("update", "failed"), ("restart", "done"), ("restart", "failed"), ("none", "none"),
    ("none", "no_observation"))}


def test_the_steps_become_counters_by_action_and_diagnosis_and_a_gauge_of_the_parallelism_asked(
        tmp_path: Path) -> None:
    collector = autoscale_collector("wc", 0, tmp_path)
    assert collector is not None
    store = MetricsStore("wc", 0)
    # no step yet: the actions at 0, no diagnosis, no parallelism asked, no step time
    assert _scrape(store, collector) == {"heron_autoscale_actions_total": ZERO_ACTIONS,
                                         "heron_autoscale_unreadable_lines_total": {_labels(): 0.0}}
    steps = four_steps(tmp_path / LOG_FILE)  # a failed scale of count, the same done, a cooldown, no observation
    with (tmp_path / LOG_FILE).open("ab") as f:
        f.write(b"{cut short\n")
    got = _scrape(store, collector)
    assert got["heron_autoscale_actions_total"] == {
        **ZERO_ACTIONS, _labels(action="update", outcome="failed"): 1.0, _labels(action="update", outcome="done"): 1.0,
        _labels(action="none", outcome="none"): 1.0, _labels(action="none", outcome="no_observation"): 1.0}
    # three steps observed count under-provisioned; the fourth observed nothing
    assert got["heron_autoscale_diagnoses_total"] == {
        _labels(diagnosis="under-provisioned", component="count"): 3.0}
    assert got["heron_autoscale_asked_parallelism"] == {_labels(component="count"): 2.0}
    assert got["heron_autoscale_last_step_timestamp_seconds"] == {_labels(): steps[-1]["time"]}
    assert got["heron_autoscale_unreadable_lines_total"] == {_labels(): 1.0}
    # a scrape counts each step once
    assert _scrape(store, collector)["heron_autoscale_actions_total"] == got["heron_autoscale_actions_total"]


def test_counters_start_at_the_collectors_making_and_the_gauges_from_the_record_before(tmp_path: Path) -> None:
    """A metrics manager restarted (every update restarts every container) counts from 0, as a
    Prometheus counter of a new process does, and still shows the parallelism last asked for."""
    record = tmp_path / LOG_FILE
    r = Recorder(record)
    first = r.at(r.now)  # count 1 -> 2, done
    assert first["action"]["parallelism"] == {"count": 2}
    collector = AutoscaleCollector("wc", record)
    got = _scrape(MetricsStore("wc", 0), collector)
    assert got["heron_autoscale_actions_total"] == ZERO_ACTIONS
    assert got["heron_autoscale_asked_parallelism"] == {_labels(component="count"): 2.0}
    assert got["heron_autoscale_last_step_timestamp_seconds"] == {_labels(): first["time"]}
    r.at(r.now + 35)  # the cooldown
    r.at(r.now + 60)  # count 2 -> 4
    got = _scrape(MetricsStore("wc", 0), collector)
    assert got["heron_autoscale_actions_total"] == {**ZERO_ACTIONS, _labels(action="update", outcome="done"): 1.0,
                                                    _labels(action="none", outcome="none"): 1.0}
    assert got["heron_autoscale_asked_parallelism"] == {_labels(component="count"): 4.0}


def test_only_container_0_exports_them_beside_the_containers_reports(tmp_path: Path) -> None:
    assert autoscale_collector("wc", 1, tmp_path) is None
    store = MetricsStore("wc", 0)
    store.restarts = {"count-3": 2}
    text = generate_latest(registry_for(lambda: store, autoscale_collector("wc", 0, tmp_path))).decode()
    assert 'heron_restarts_total{container="0",process="count-3",topology="wc"} 2.0' in text
    assert 'heron_autoscale_actions_total{action="none",outcome="none",topology="wc"} 0.0' in text
    assert "heron_autoscale" not in generate_latest(registry_for(lambda: store)).decode()


def test_a_step_s_action_and_outcome() -> None:
    scale = {"kind": "scale", "parallelism": {"count": 4, "split": 2}, "why": "w"}
    assert step_action({"decision": "scale", "action": scale, "outcome": {"ok": True, "message": "m"}}) == (
        "update", "done")
    assert step_action({"decision": "scale", "action": scale, "outcome": {"ok": False, "error": "e"}}) == (
        "update", "failed")
    assert step_action({"decision": "scale", "action": scale, "outcome": {"dry_run": True}}) == ("update", "dry_run")
    assert step_action({"decision": "restart", "action": {"kind": "restart", "container": 1, "why": "w"},
                        "outcome": {"ok": True, "message": "m"}}) == ("restart", "done")
    assert step_action({"decision": "none", "action": {"kind": "none", "why": "cooldown"}, "outcome": None}) == (
        "none", "none")
    assert step_action({"decision": "no observation", "error": "e"}) == ("none", "no_observation")
    assert step_action({"decision": "??", "action": {"kind": "explode"}}) is None
    assert step_action({"action": "scale"}) is None
    # a dry run asked for nothing; a failed update did ask
    assert asked_parallelism({"action": scale, "outcome": {"dry_run": True}}) == {}
    assert asked_parallelism({"action": scale, "outcome": {"ok": False}}) == {"count": 4, "split": 2}
    assert asked_parallelism({"action": {"kind": "scale", "parallelism": {"count": True, "x": "3"}},
                              "outcome": {"ok": True}}) == {}


def test_a_step_with_fields_of_the_wrong_shape_counts_what_it_can() -> None:
    tally = AutoscaleTally()
    tally.add({"time": "noon", "action": {"kind": "restart", "container": 2}, "outcome": {"ok": True},
               "diagnoses": [{"kind": "slow instance", "component": "split", "task": 4}, "slow", {"kind": "x"}]})
    tally.add({"diagnoses": {"kind": "data skew"}})
    fams = tally.families("wc", 0)
    assert [r for r in fams["heron_autoscale_actions"][2] if r[1]] == [(["wc", "restart", "done"], 1.0)]
    assert fams["heron_autoscale_diagnoses"] == (True, ["topology", "diagnosis", "component"],
                                                 [(["wc", "slow instance", "split"], 1.0)])
    assert "heron_autoscale_last_step_timestamp_seconds" not in fams
