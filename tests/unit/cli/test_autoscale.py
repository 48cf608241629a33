"""``heron-py autoscale`` (heron_py/cli/autoscale.py): the health manager's loop with fakes for
the topology (the fluid model of tests/unit/elastic/sim.py answers as the master's API would),
the update, the clock and the sleep; the master's answers read as an observation; the record's
file; and the verb's dry run on a stored topology."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.cli.autoscale import HealthManager, StepFailed, TopologyGone, observation_from, settings
from heron_py.cli.autoscale_log import LOG_FILE, AutoscaleLog, entry_lines, last_entries
from heron_py.cli.errors import SubmitError
from heron_py.common.config import LogCaps
from heron_py.elastic.config import AutoscaleConfig
from heron_py.elastic.observations import InputStream
from heron_py.elastic.policy import RestartContainer, Scale, State
from heron_py.planner.model import GroupingKind, TopologyDef
from tests.fakes import Counter, Splitter, WordSpout, numbers_topology
from tests.unit.elastic.sim import Sim, Stage

ON = AutoscaleConfig(enabled=True)  # every 30 s over 30 s windows, cooldown 60 s, steps of 2x at most
UPDATE_TIMEOUT = ("update: topology 'wc' did not come back within 60 s: tasks not running yet: ['4']. "
                  "Last log lines:\n(none)")


def word_count(offered: float, count: int = 1) -> Sim:
    """sentences read up to 5,000/s; split takes 20,000 sentences/s a task and emits 8 words each;
    count takes 10,000 words/s a task: at 4,000 sentences/s count needs 4 tasks, at 1,000 one."""
    return Sim([Stage("sentences", 5000), Stage("split", 20_000, 8), Stage("count", 10_000, 0)],
               {"sentences": 1, "split": 1, "count": count}, offered)


class Clock:
    """Wall-clock time that only the test (and the fake sleep and update) moves."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Update:
    """``update_topology`` as the loop calls it: the first ``failures`` calls fail as a wait that
    timed out does; the others resize the model, taking ``takes`` seconds of the clock."""

    def __init__(self, sim: Sim, clock: Clock, failures: int = 0, takes: float = 0.0) -> None:
        self.sim, self.clock, self.failures, self.takes = sim, clock, failures, takes
        self.calls: list[Scale | RestartContainer] = []

    def __call__(self, action: Scale | RestartContainer) -> str:
        self.calls.append(action)
        self.clock.now += self.takes
        if self.failures:
            self.failures -= 1
            raise StepFailed(UPDATE_TIMEOUT)
        assert isinstance(action, Scale)
        before = dict(self.sim.parallelism)
        self.sim.apply(dict(action.parallelism))
        return "updated: " + ", ".join(f"{c} {before[c]} -> {n}" for c, n in action.parallelism)


def manager(sim: Sim, clock: Clock, act: Any, config: AutoscaleConfig = ON,
            entries: list[dict[str, Any]] | None = None) -> HealthManager:
    record = entries.append if entries is not None else (lambda e: None)
    return HealthManager(config, observe=sim.observe, act=act, record=record, clock=clock, sleep=clock.sleep)


def test_a_scale_action_calls_update_with_the_changes_and_records_why() -> None:
    sim, clock = word_count(4000), Clock()
    entries: list[dict[str, Any]] = []
    update = Update(sim, clock)
    entry = manager(sim, clock, update, entries=entries).step()
    assert update.calls == [Scale((("count", 2),), (
        "count is under-provisioned: its tasks were busy 100% of the window; stream manager 1 was in backpressure 60% "
        "of the 30 s window (threshold 10%); behind it: count 60%; count: target input 40,000/s, one task's true "
        "rate 10,000/s; DS2 asks 4; 1 -> 2 (the max scale factor)"))]
    assert entries == [entry]
    assert json.loads(json.dumps(entry)) == entry  # a JSON line as it is
    assert (entry["time"], entry["decision"], entry["state"], entry["parallelism"], entry["throughput"]) == (
        1000.0, "scale", "awaiting the new plan", {"sentences": 1, "split": 1, "count": 1}, 1250.0)
    assert entry["action"] == {"kind": "scale", "parallelism": {"count": 2}, "why": update.calls[0].why}
    assert entry["outcome"] == {"ok": True, "message": "updated: count 1 -> 2"}
    assert [(d["kind"], d["component"]) for d in entry["diagnoses"]] == [("under-provisioned", "count")]
    count = entry["sizing"][2]
    assert (count["component"], count["current"], count["target"], count["ideal"], count["bound"]) == (
        "count", 1, 2, 4, "the max scale factor")
    assert count["line"] == ("count: target input 40,000/s, one task's true rate 10,000/s; DS2 asks 4; 1 -> 2 "
                             "(the max scale factor)")
    assert entry_lines(entry)[1:] == [
        "  diagnosis: " + entry["diagnoses"][0]["explanation"],
        *(f"  sizing: {s['line']}" for s in entry["sizing"]),
        "  action: scale count 1 -> 2", f"    why: {update.calls[0].why}", "  done: updated: count 1 -> 2"]
    assert entry_lines(entry)[0].endswith(" window 30 s: sentences 1, split 1, count 1; sources 1,250 records/s")


def test_a_failed_update_is_logged_and_the_policy_is_told_nothing_happened() -> None:
    sim, clock = word_count(4000), Clock()
    entries: list[dict[str, Any]] = []
    update = Update(sim, clock, failures=1)
    hm = manager(sim, clock, update, entries=entries)
    failed = hm.step()
    assert failed["outcome"] == {"ok": False, "error": UPDATE_TIMEOUT}
    assert entry_lines(failed)[-1] == f"  FAILED: {UPDATE_TIMEOUT}"
    # not counted: no action in the policy's history, no plan awaited, no cooldown started
    assert (hm.policy.state, hm.policy.history, sim.parallelism["count"]) == (State.READY, (), 1)
    clock.now += 5  # the next step, well inside the cooldown a counted action would have started
    again = hm.step()
    assert [dict(a.parallelism) for a in update.calls] == [{"count": 2}, {"count": 2}]  # type: ignore[union-attr]
    assert again["outcome"] == {"ok": True, "message": "updated: count 1 -> 2"}
    assert hm.policy.state is State.AWAITING_PLAN and [t.time for t in hm.policy.history] == [1005.0]
    assert [e["outcome"]["ok"] for e in entries] == [False, True]


def test_the_cooldown_is_respected_through_the_policy() -> None:
    sim, clock = word_count(4000), Clock(0.0)
    entries: list[dict[str, Any]] = []
    update = Update(sim, clock)
    hm = manager(sim, clock, update, entries=entries)
    hm.run(lambda: len(entries) == 4)  # steps at 0, 30, 60 and 90 (each 30 s after the last began)
    assert [e["time"] for e in entries] == [0.0, 30.0, 60.0, 90.0]
    assert [e["decision"] for e in entries] == ["scale", "none", "scale", "none"]
    assert entries[1]["action"]["why"] == "cooldown: 30 s left of 60 s after the action at 0"
    assert [e["diagnoses"][0]["kind"] for e in entries[:2]] == ["under-provisioned"] * 2  # diagnosed, held
    assert [dict(a.parallelism) for a in update.calls] == [{"count": 2}, {"count": 4}]  # type: ignore[union-attr]
    assert entries[3]["parallelism"]["count"] == 4 and entries[3]["outcome"] is None
    assert entry_lines(entries[1])[-1] == "  no action: cooldown: 30 s left of 60 s after the action at 0"


@pytest.mark.parametrize(("window", "slept", "times"), [(10.0, [10.0, 30.0], [0.0, 30.0, 60.0]),
                                                        (25.0, [25.0, 30.0], [0.0, 45.0, 75.0])])
def test_an_action_takes_its_time_out_of_the_interval_and_a_window_follows_it(
        window: float, slept: list[float], times: list[float]) -> None:
    sim, clock = word_count(4000), Clock(0.0)
    entries: list[dict[str, Any]] = []
    config = AutoscaleConfig(enabled=True, window_secs=window)
    hm = manager(sim, clock, Update(sim, clock, takes=20.0), config=config, entries=entries)
    hm.run(lambda: len(entries) == 3)  # a scale at 0 that ends at 20, its cooldown, the next scale
    assert [e["decision"] for e in entries] == ["scale", "none", "scale"]
    assert (clock.slept, [e["time"] for e in entries]) == (slept, times)


def test_once_is_one_step_and_a_stop_is_seen_after_the_sleep() -> None:
    sim, clock = word_count(1000), Clock(0.0)
    entries: list[dict[str, Any]] = []
    assert manager(sim, clock, None, entries=entries).run(lambda: False, once=True) == entries[0]
    assert clock.slept == []
    stop: list[bool] = []

    def sleep(seconds: float) -> None:  # a signal arrives during the sleep
        clock.sleep(seconds)
        stop.append(True)

    hm = HealthManager(ON, observe=sim.observe, act=None, record=entries.append, clock=clock, sleep=sleep)
    hm.run(lambda: bool(stop))
    assert len(entries) == 2 and clock.slept == [30.0]


def test_a_dry_run_acts_on_nothing_and_says_what_it_would_do() -> None:
    sim, clock = word_count(4000), Clock()
    entry = manager(sim, clock, None).step()
    assert (entry["decision"], entry["action"]["parallelism"], entry["outcome"]) == (
        "scale", {"count": 2}, {"dry_run": True})
    assert entry_lines(entry)[-3:-2] == ["  action: scale count 1 -> 2"]
    assert entry_lines(entry)[-1] == "  dry run: not carried out"
    assert sim.parallelism["count"] == 1


def test_disabled_it_only_reports_its_diagnoses() -> None:
    sim, clock = word_count(4000), Clock()
    entries: list[dict[str, Any]] = []
    update = Update(sim, clock)
    entry = manager(sim, clock, update, config=AutoscaleConfig(enabled=False), entries=entries).step()
    assert update.calls == []
    assert (entry["decision"], entry["action"]["why"]) == ("none", "heron_py.autoscale.enabled is false: "
                                                                   "diagnoses only")
    assert [d["kind"] for d in entry["diagnoses"]] == ["under-provisioned"]
    # DS2's sizes are shown all the same: what it would do were it on
    assert [(s["component"], s["target"]) for s in entry["sizing"]] == [("sentences", 1), ("split", 1), ("count", 2)]


def test_an_observation_that_fails_is_recorded_and_the_loop_goes_on() -> None:
    sim, clock = word_count(4000), Clock(0.0)
    entries: list[dict[str, Any]] = []
    calls = iter([StepFailed("observing topology 'wc': topology master of 'wc' at 127.0.0.1:1 is not reachable: "
                             "[Errno 111] Connection refused")])

    def observe() -> Any:
        failure = next(calls, None)
        if failure is not None:
            raise failure
        return sim.observe()

    update = Update(sim, clock)
    hm = HealthManager(ON, observe=observe, act=update, record=entries.append, clock=clock, sleep=clock.sleep)
    hm.run(lambda: len(entries) == 2)
    assert entries[0] == {"time": 0.0, "decision": "no observation", "error": (
        "observing topology 'wc': topology master of 'wc' at 127.0.0.1:1 is not reachable: [Errno 111] Connection "
        "refused")}
    assert entry_lines(entries[0])[0].endswith(" no observation: observing topology 'wc': topology master of 'wc' "
                                               "at 127.0.0.1:1 is not reachable: [Errno 111] Connection refused")
    assert entries[1]["decision"] == "scale" and len(update.calls) == 1


def test_it_stops_once_the_topology_is_gone() -> None:
    sim, clock = word_count(1000), Clock(0.0)
    entries: list[dict[str, Any]] = []
    answers = iter([sim.observe()])

    def observe() -> Any:
        got = next(answers, None)
        if got is None:
            raise TopologyGone("topology 'wc' is not in the state manager any more (killed)")
        return got

    hm = HealthManager(ON, observe=observe, act=None, record=entries.append, clock=clock, sleep=clock.sleep)
    last = hm.run(lambda: False)
    assert last == entries[-1] == {"time": 30.0, "decision": "no observation", "gone": True,
                                   "error": "topology 'wc' is not in the state manager any more (killed)"}
    assert len(entries) == 2


# --- the master's answers as an observation ---

def _answer(values: dict[str, dict[str, float]]) -> dict[str, Any]:
    return {"component": "?", "interval": 30.0, "metrics": values, "metricnames": sorted(values)}


def test_the_masters_answers_make_the_observation() -> None:
    topo = numbers_topology()  # numbers (1 task) -> sink (2 tasks stored)
    plan = {"spouts": {"numbers": [1]}, "bolts": {"sink": [2, 3, 4]},  # the running plan: sink has 3
            "instances": {"1": {"component": "numbers", "container": 0}, "2": {"component": "sink", "container": 1},
                          "3": {"component": "sink", "container": 0}, "4": {"component": "sink", "container": 1},
                          "9": {"component": "sink", "container": 1}}}
    sink = {t: 1.0 for t in ("2", "3", "4", "9")}
    answers = {"numbers": _answer({"__emit-count/default": {"1": 3000}, "__busy-time-ms": {"1": 1000},
                                   "__time-blocked-ms": {"1": 0}, "__in-queue-batches": {"1": 0}}),
               "sink": _answer({"__execute-count/numbers/default": {**sink, "2": 1000, "3": 1000, "4": 1000},
                                "__busy-time-ms": {**sink, "2": 3000, "3": 3000, "4": 3000},
                                "__time-blocked-ms": sink, "__in-queue-batches": sink})}
    stmgrs = _answer({"__time_spent_back_pressure_ms": {"0": 6000, "1": 0},
                      "__time_spent_back_pressure_by_compid/sink": {"0": 6000}})
    obs = observation_from(topo, plan, answers, stmgrs, 30.0)
    assert obs.parallelism() == {"numbers": 1, "sink": 3}
    assert [(c.name, c.inputs, c.is_spout, c.max_parallelism) for c in obs.components] == [
        ("numbers", (), True, 128), ("sink", ("numbers",), False, 128)]
    # each input with its stream and grouping, which the sizing reads an upstream's share by
    assert obs.spec("sink").streams == (InputStream("numbers", "default", GroupingKind.FIELDS),)
    assert [(t.component, t.task, t.container, t.records_in) for t in obs.tasks] == [
        ("numbers", 1, 0, 0.0), ("sink", 2, 1, 1000.0), ("sink", 3, 0, 1000.0), ("sink", 4, 1, 1000.0)]
    assert [s.line() for s in obs.skipped] == ["sink task 9: not in the current plan"]  # an old plan's series
    assert [(c.container, c.backpressure_fraction, c.by_cause) for c in obs.containers] == [
        (0, 0.2, (("sink", 6000.0),)), (1, 0.0, ())]


def test_the_settings_and_the_command_lines_interval_and_window() -> None:
    topo = _topology({"heron_py.autoscale.interval.secs": "10", "heron_py.autoscale.cooldown.secs": "5"})
    assert (settings(topo, None, None).interval_secs, settings(topo, None, None).window_secs) == (10.0, 30.0)
    config = settings(topo, 2.5, 4.0)
    assert (config.interval_secs, config.window_secs, config.cooldown_secs, config.enabled) == (2.5, 4.0, 5.0, False)
    with pytest.raises(SubmitError) as e:
        settings(_topology({"heron_py.autoscale.max.parallelism": "counter:4"}), None, None)
    assert str(e.value) == ("autoscale: topology 'wc': config heron_py.autoscale.max.parallelism: expected "
                            "components of the topology (count, sentences, split), found 'counter'")


# --- the record ---

def test_last_entries_are_the_newest_whole_lines_from_the_rotated_file_too(tmp_path: Path) -> None:
    logs = tmp_path / "topologies" / "wc" / "logs"
    logs.mkdir(parents=True)
    log = AutoscaleLog(logs / LOG_FILE, LogCaps(max_bytes=300, keep=1))
    for i in range(12):
        log.append({"time": float(i), "decision": "none", "why": "x" * 40})
    assert (logs / f"{LOG_FILE}.1").exists() and (logs / LOG_FILE).stat().st_mode & 0o777 == 0o600
    assert [e["time"] for e in last_entries("wc", 5, home=tmp_path)] == [7.0, 8.0, 9.0, 10.0, 11.0]
    held = len((logs / LOG_FILE).read_text().splitlines())
    assert [e["time"] for e in last_entries("wc", held + 1, home=tmp_path)] == [float(i) for i in
                                                                                range(11 - held, 12)]
    with (logs / LOG_FILE).open("a") as f:
        f.write('{"time": 12.0, "decis')  # being written
    assert [e["time"] for e in last_entries("wc", 2, home=tmp_path)] == [10.0, 11.0]
    assert last_entries("wc", 0, home=tmp_path) == []
    assert last_entries("other", 3, home=tmp_path) == []


# --- the verb ---

def _topology(config: dict[str, Any] | None = None) -> TopologyDef:
    b = TopologyBuilder("wc")
    spout = b.add_spout("sentences", WordSpout, par=1)
    split = b.add_bolt("split", Splitter, par=1, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("count", Counter, par=1, inputs={split: Grouping.fields("word")})
    b.set_config(config or {})
    return b.build()


def test_the_verbs_dry_run_reads_the_topologys_settings_and_acts_on_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from heron_py.cli import autoscale
    from heron_py.cli.main import main
    from heron_py.state import LocalFsStateManager

    state = LocalFsStateManager(tmp_path)
    state.set_secret("wc", b"k" * 32)
    state.set_topology(_topology({"heron_py.autoscale.window.secs": "20"}))  # enabled: off, the default
    state.close()
    monkeypatch.setenv("HERON_PY_HOME", str(tmp_path))
    sim = word_count(4000)
    windows: list[float] = []

    def observe(state: Any, name: str, window: float) -> Any:
        windows.append(window)
        return sim.observe()

    def carry_out(*args: Any) -> str:
        raise AssertionError("a dry run carries nothing out")

    monkeypatch.setattr(autoscale, "observe_topology", observe)
    monkeypatch.setattr(autoscale, "carry_out", carry_out)
    assert main(["autoscale", "wc", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "topology 'wc': dry run over the last 20 s; nothing is carried out"
    assert "  action: scale count 1 -> 2" in out and out[-1] == "  dry run: not carried out"
    assert windows == [20.0] and sim.parallelism["count"] == 1
    assert not (tmp_path / "topologies" / "wc" / "logs" / LOG_FILE).exists()  # a dry run records nothing
