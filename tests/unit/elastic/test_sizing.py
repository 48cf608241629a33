"""DS2's sizing (heron_py/elastic/sizing.py) on examples computed by hand, its sources' rule, and
the limits."""

from __future__ import annotations

import pytest

from heron_py.elastic.config import PerComponent
from heron_py.elastic.diagnosis import Kind, SymptomKind, Thresholds, diagnose
from heron_py.elastic.observations import ComponentSpec, TaskWindow, TopologyObservation, UsefulTime
from heron_py.elastic.sizing import (
    Bound,
    ComponentSize,
    Limits,
    SourceRule,
    SourceTarget,
    ceil_tasks,
    limit,
    measure,
    size,
    source_targets,
    throughput,
)
from heron_py.planner.model import GroupingKind

from .windows import bolt, chain, container, observation, spout_task, task, trace_observation

WINDOW = 10.0


def word_count(count_busy_ms: float = 5000.0) -> TopologyObservation:
    """sentences at 10,000/s (busy half the window: 20,000/s true); split takes 20,000/s of useful
    time and emits 8 words per sentence; count's 8 tasks each take 10,000 words/s, busy half the
    window: a true rate of 20,000/s."""
    comps = chain(("sentences", 1), ("split", 1), ("count", 8))
    tasks = [TaskWindow("sentences", 1, WINDOW, (), 100_000, 5000, UsefulTime.BUSY, 0, 0),
             TaskWindow("split", 2, WINDOW, (("sentences", 100_000),), 800_000, 5000, UsefulTime.BUSY, 0, 0)]
    tasks += [TaskWindow("count", t, WINDOW, (("split", 100_000),), 0, count_busy_ms, UsefulTime.BUSY, 0, 0)
              for t in range(3, 11)]
    return TopologyObservation(WINDOW, comps, tuple(tasks))


def test_word_count_by_hand_each_figure() -> None:
    obs = word_count()
    rates = measure(obs)
    s, sp, c = rates["sentences"], rates["split"], rates["count"]
    assert (s.output_rate, s.true_output_rate, s.true_rate, s.input_rate, s.selectivity) == (
        10_000, 20_000, None, 0, None)
    assert (sp.input_rate, sp.output_rate, sp.selectivity, sp.true_rate, sp.true_output_rate) == (
        10_000, 80_000, 8.0, 20_000, 160_000)
    assert (c.input_rate, c.received, c.true_rate, c.selectivity, c.measured, c.parallelism) == (
        80_000, (("split", 80_000),), 20_000, 0.0, 8, 8)
    assert throughput(rates, obs) == 10_000
    sources = source_targets(obs, rates, {}, 0.1)
    assert sources == {"sentences": SourceTarget("sentences", 10_000, SourceRule.OBSERVED)}
    plan = size(obs, sources, Limits(), rates)
    assert plan.sizes == (
        ComponentSize("sentences", 1, 10_000, 10_000, 20_000, None, 1, Bound.SOURCE, source=True),
        ComponentSize("split", 1, 10_000, 80_000, 20_000, 1, 1, Bound.NONE),
        ComponentSize("count", 8, 80_000, 0.0, 20_000, 4, 4, Bound.NONE))
    assert plan.changes() == {"count": 4}
    assert plan.sources == (sources["sentences"],)
    assert [x.line() for x in plan.sizes] == [
        "sentences: target output 10,000/s, one task's true rate 20,000/s; DS2 cannot size it; 1 -> 1 (a source "
        "keeping up with its input keeps its parallelism)",
        "split: target input 10,000/s, one task's true rate 20,000/s; DS2 asks 1; 1 -> 1",
        "count: target input 80,000/s, one task's true rate 20,000/s; DS2 asks 4; 8 -> 4"]


def test_a_true_rate_a_hair_under_the_need_takes_one_more_task() -> None:
    plan = size(word_count(count_busy_ms=5000.5), {"sentences": SourceTarget("sentences", 10_000,
                                                                             SourceRule.OBSERVED)}, Limits())
    assert (plan.size_of("count").ideal, plan.size_of("count").parallelism) == (5, 5)


def test_tasks_round_up_but_not_over_floating_point_noise() -> None:
    assert (ceil_tasks(80_000, 20_000), ceil_tasks(80_001, 20_000), ceil_tasks(0, 5)) == (4, 5, 0)
    assert 21 / 1.4 > 15 and ceil_tasks(21, 1.4) == 15


def test_a_configured_target_sizes_the_source_and_everything_after_it() -> None:
    obs = word_count()
    sources = source_targets(obs, measure(obs), {"sentences": 30_000}, 0.1)
    assert sources["sentences"] == SourceTarget("sentences", 30_000, SourceRule.CONFIGURED)
    plan = size(obs, sources, Limits(max_scale_factor=4))
    assert [(x.component, x.target_input_rate, x.ideal, x.parallelism, x.bound) for x in plan.sizes] == [
        ("sentences", 30_000, 2, 2, Bound.NONE), ("split", 30_000, 2, 2, Bound.NONE),
        ("count", 240_000, 12, 12, Bound.NONE)]
    assert plan.size_of("sentences").line() == ("sentences: target output 30,000/s, one task's true rate 20,000/s; "
                                                "DS2 asks 2; 1 -> 2")


def held(bp_ms: float = 0.0, blocked_ms: float = 0.0, spout_busy_ms: float = 10_000.0) -> TopologyObservation:
    """A spout that emitted 3,000 in 30 s, busy ``spout_busy_ms`` (a true rate of 3,000/s at 1 s)."""
    comps = chain(("src", 2), ("sink", 1))
    tasks = [spout_task("src", 1, 1500, spout_busy_ms / 2, blocked_ms=blocked_ms),
             spout_task("src", 2, 1500, spout_busy_ms / 2, blocked_ms=blocked_ms),
             task("sink", 3, 3000, 3000, source="src")]
    return observation(comps, tasks, [container(1, 0), container(2, bp_ms)])


def rule(obs: TopologyObservation) -> SourceTarget:
    return source_targets(obs, measure(obs), {}, 0.1)["src"]


def test_a_source_running_freely_targets_its_observed_rate_and_a_held_one_its_true_rate() -> None:
    assert rule(held()) == SourceTarget("src", 100.0, SourceRule.OBSERVED)
    # backpressure of exactly the threshold (3 s of 30) is not over it
    assert rule(held(bp_ms=3000)) == SourceTarget("src", 100.0, SourceRule.OBSERVED)
    assert rule(held(bp_ms=3001)) == SourceTarget("src", 600.0, SourceRule.TRUE_RATE)  # 1,500 per 5 s, 2 tasks
    assert rule(held(blocked_ms=3000)) == SourceTarget("src", 100.0, SourceRule.OBSERVED)
    assert rule(held(blocked_ms=3001)) == SourceTarget("src", 600.0, SourceRule.TRUE_RATE)
    assert rule(held(bp_ms=9000, spout_busy_ms=0)) == SourceTarget("src", None, SourceRule.TRUE_RATE)


def test_a_configured_source_without_a_rate_keeps_its_size() -> None:
    obs = held()
    plan = size(obs, {"src": SourceTarget("src", None, SourceRule.CONFIGURED)}, Limits())
    assert [(x.ideal, x.parallelism, x.bound) for x in plan.sizes] == [(None, 2, Bound.SOURCE),
                                                                      (None, 1, Bound.UNKNOWN)]


def test_a_held_source_without_a_true_rate_leaves_everything_after_it_unsized() -> None:
    obs = held(bp_ms=9000, spout_busy_ms=0)
    plan = size(obs, source_targets(obs, measure(obs), {}, 0.1), Limits())
    assert [(x.ideal, x.parallelism, x.bound) for x in plan.sizes] == [(None, 2, Bound.SOURCE),
                                                                      (None, 1, Bound.UNKNOWN)]
    assert plan.size_of("sink").line() == ("sink: target input unknown, one task's true rate 1,000/s; DS2 cannot size "
                                           "it; 1 -> 1 (no rate to size it by)")


def test_an_input_without_its_stream_and_grouping_carries_its_observed_share() -> None:
    src = ComponentSpec("src", 1, (), True)
    comps = (src, ComponentSpec("a", 1, ("src",), False), ComponentSpec("b", 1, ("src",), False),
             ComponentSpec("all", 3, ("src",), False))
    tasks = [spout_task("src", 1, 1000, 1000),  # 100/s on two streams: 60 to a, 40 to b, all of it to "all"
             task("a", 2, 600, 600, source="src"), task("b", 3, 400, 400, source="src")]
    tasks += [task("all", t, 1000, 1000, source="src") for t in (4, 5, 6)]
    obs = observation(comps, tasks, seconds=10)
    plan = size(obs, {"src": SourceTarget("src", 2000, SourceRule.CONFIGURED)}, Limits(max_scale_factor=100))
    assert [(x.component, x.target_input_rate) for x in plan.sizes] == [
        ("src", 2000), ("a", 1200), ("b", 800), ("all", 6000)]
    assert [x.parallelism for x in plan.sizes] == [2, 2, 1, 6]


def test_a_backlog_without_backpressure_sizes_the_component_to_keep_up_with_what_it_is_sent() -> None:
    """The trace: split sends count 8,000 words/s, count's 2 tasks execute 4,800/s (60%), busy
    99% of the window, at 2,422/s of useful time each; no backpressure yet. Read from what count
    executed, its share of split's output was 60% and its target 4,800/s: DS2 asked 2, the
    parallelism that falls behind. Read from what split emitted on the stream count subscribes
    to (fields grouped: count takes all of it), the target is 8,000/s: 4 tasks."""
    obs = trace_observation("backlog_no_backpressure.json")
    rates = measure(obs)
    count, split = rates["count"], rates["split"]
    assert (split.output_rate, split.emitted, count.input_rate, count.parallelism) == (
        8000, (("default", 8000),), 4800, 2)
    assert count.input_rate / split.output_rate == 0.6 and count.true_rate == pytest.approx(2421.8, abs=0.05)
    report = diagnose(obs, Thresholds())
    assert [s.kind for s in report.symptoms] == [SymptomKind.PENDING, SymptomKind.PENDING]  # no backpressure
    assert [(d.kind, d.component) for d in report.diagnoses] == [(Kind.UNDER_PROVISIONED, "count")]
    sources = source_targets(obs, rates, {}, 0.1)
    assert sources["sentences"] == SourceTarget("sentences", 1000, SourceRule.OBSERVED)
    plan = size(obs, sources, Limits(), rates)
    c = plan.size_of("count")
    assert (c.target_input_rate, c.ideal, c.parallelism, c.bound) == (8000, 4, 4, Bound.NONE)
    assert plan.changes() == {"count": 4}
    assert c.line() == "count: target input 8,000/s, one task's true rate 2,422/s; DS2 asks 4; 2 -> 4"


def two_streams(clicks_executed: float = 600) -> TopologyObservation:
    """In 10 s: src emits 1,000 sentences; router takes them and emits 1,500 on "clicks" and 500
    on "views" (none on "errors"). clicks (shuffled) executed ``clicks_executed`` of its stream,
    busy the whole window; views (fields) all of its own, busy a quarter; both takes both streams;
    errors takes a stream that was silent."""
    comps = (ComponentSpec("src", 1, (), True),
             bolt("router", 1, ("src", "default", GroupingKind.SHUFFLE)),
             bolt("clicks", 1, ("router", "clicks", GroupingKind.SHUFFLE)),
             bolt("views", 1, ("router", "views", GroupingKind.FIELDS)),
             bolt("both", 1, ("router", "clicks", GroupingKind.LOCAL_OR_SHUFFLE),
                  ("router", "views", GroupingKind.LOWEST)),
             bolt("errors", 2, ("router", "errors", GroupingKind.NONE)))
    tasks = [spout_task("src", 1, 0, 1000, emitted={"default": 1000}),
             task("router", 2, 1000, 1000, emitted={"clicks": 1500, "views": 500}),
             task("clicks", 3, clicks_executed, 10_000, executed={("router", "clicks"): clicks_executed}),
             task("views", 4, 500, 2500, executed={("router", "views"): 500}),
             task("both", 5, 2000, 5000, executed={("router", "clicks"): 1500, ("router", "views"): 500})]
    tasks += [task("errors", t, 0, 0, executed={}) for t in (6, 7)]
    return observation(comps, tasks, seconds=10)


def test_each_consumer_of_a_two_stream_upstream_is_sent_its_streams_share_of_the_target() -> None:
    """At 200 sentences/s, router takes 200/s and emits 400/s: 300 on clicks, 100 on views (its
    selectivity 1.5 and 0.5 on each). clicks executed 600 of the 1,500 it was sent: its target is
    still the whole of its stream, 300/s, 5 tasks at 60/s each (from what it executed, 120/s)."""
    obs = two_streams()
    plan = size(obs, {"src": SourceTarget("src", 200, SourceRule.CONFIGURED)}, Limits(max_scale_factor=100))
    assert [(x.component, x.target_input_rate, x.true_rate, x.ideal) for x in plan.sizes] == [
        ("src", 200, 1000, 1), ("router", 200, 1000, 1), ("clicks", 300, 60, 5), ("views", 100, 200, 1),
        ("both", 400, 400, 1), ("errors", 0, None, 1)]
    assert plan.size_of("router").target_output_rate == 400
    # no backlog: the same figures
    plan = size(two_streams(1500), {"src": SourceTarget("src", 200, SourceRule.CONFIGURED)}, Limits())
    assert (plan.size_of("clicks").target_input_rate, plan.size_of("clicks").true_rate) == (300, 150)


def test_an_upstream_that_sent_nothing_passes_its_whole_target_on() -> None:
    comps = chain(("src", 1), ("sink", 1))
    obs = observation(comps, [spout_task("src", 1, 0, 0), task("sink", 2, 0, 0, source="src")])
    plan = size(obs, {"src": SourceTarget("src", 500, SourceRule.CONFIGURED)}, Limits())
    assert (plan.size_of("sink").target_input_rate, plan.size_of("sink").bound) == (500, Bound.UNKNOWN)


def test_an_upstream_that_emitted_nothing_on_any_stream_passes_its_whole_target_on() -> None:
    comps = (ComponentSpec("src", 1, (), True), bolt("sink", 1, ("src", "events", GroupingKind.SHUFFLE)))
    obs = observation(comps, [spout_task("src", 1, 0, 0), task("sink", 2, 0, 0, executed={})])
    plan = size(obs, {"src": SourceTarget("src", 500, SourceRule.CONFIGURED)}, Limits())
    assert (plan.size_of("sink").target_input_rate, plan.size_of("sink").bound) == (500, Bound.UNKNOWN)


def broadcast(rules_per_task: float = 500, cache_busy_ms: float = 5000) -> TopologyObservation:
    """In 10 s: events emits 2,000, rules 500. enrich's 2 tasks share the events (shuffle) and
    each takes every rule (all): 1,000 + 500 records each, busy 7.5 s, 200/s of useful time.
    cache's 3 tasks take only the rules (all), 500 each."""
    comps = (ComponentSpec("events", 1, (), True), ComponentSpec("rules", 1, (), True),
             bolt("enrich", 2, ("events", "default", GroupingKind.SHUFFLE), ("rules", "default", GroupingKind.ALL)),
             bolt("cache", 3, ("rules", "default", GroupingKind.ALL)))
    tasks = [spout_task("events", 1, 0, 1000, emitted={"default": 2000}),
             spout_task("rules", 2, 0, 1000, emitted={"default": 500})]
    tasks += [task("enrich", t, 0, 7500, executed={("events", "default"): 1000, ("rules", "default"): 500})
              for t in (3, 4)]
    tasks += [task("cache", t, 0, cache_busy_ms, executed={("rules", "default"): rules_per_task}) for t in (5, 6, 7)]
    return observation(comps, tasks, seconds=10)


def test_an_all_grouped_input_takes_its_part_of_every_task_and_is_not_scaled_for() -> None:
    """events at 1,200/s (configured), rules at 50/s (observed): each enrich task spends 50/s of
    its 200/s on the rules, and the events are shared on the 150/s left: 8 tasks, taking
    1,200 + 8 x 50 = 1,600/s in all. (Counting the rules' copies as input the tasks share, the
    observed 2 copies of each, would ask (1,200 + 100) / 200 = 7.) cache takes only the rules:
    more tasks would each take all of them, so it keeps its 3, as it would at any rate."""
    obs = broadcast()
    sources = {"events": SourceTarget("events", 1200, SourceRule.CONFIGURED),
               "rules": SourceTarget("rules", 50, SourceRule.OBSERVED)}
    plan = size(obs, sources, Limits(max_scale_factor=100))
    e, c = plan.size_of("enrich"), plan.size_of("cache")
    assert (e.target_input_rate, e.each_task_input, e.true_rate, e.ideal, e.parallelism, e.bound) == (
        1600, 50, 200, 8, 8, Bound.NONE)
    assert (c.target_input_rate, c.each_task_input, c.true_rate, c.ideal, c.parallelism, c.bound) == (
        150, 50, 100, None, 3, Bound.ALL_GROUPED)
    assert c.line() == ("cache: target input 150/s (50/s of it to every task, all grouped), one task's true rate "
                        "100/s; DS2 cannot size it; 3 -> 3 (every task takes its all-grouped input whole, which more "
                        "tasks do not share)")
    # rules at 400/s: enrich's tasks cannot keep up with the rules alone, whatever their number
    plan = size(obs, {**sources, "rules": SourceTarget("rules", 400, SourceRule.CONFIGURED)},
                Limits(max_scale_factor=100))
    assert [(x.component, x.ideal, x.parallelism, x.bound) for x in plan.sizes[2:]] == [
        ("enrich", None, 2, Bound.ALL_GROUPED), ("cache", None, 3, Bound.ALL_GROUPED)]
    # the limits still win, and an all-grouped component without a true rate cannot be sized
    plan = size(broadcast(cache_busy_ms=0), sources, Limits(2.0, PerComponent(1, (("cache", 4),))))
    assert [(x.component, x.parallelism, x.bound) for x in plan.sizes[2:]] == [
        ("enrich", 4, Bound.STEP), ("cache", 4, Bound.MIN)]
    plan = size(broadcast(cache_busy_ms=0), sources, Limits())
    assert (plan.size_of("cache").parallelism, plan.size_of("cache").bound) == (3, Bound.UNKNOWN)


def test_a_direct_grouping_keeps_the_observed_share_of_what_its_sender_sent() -> None:
    """dispatcher emits 1,000 on "jobs" (direct: it names each tuple's task) and 500 on "log" in
    10 s; it sent w1 800 jobs, w2 200, and w1 takes the log too (shuffle). At twice the rate,
    dispatcher's 300/s: w1 its observed 800 / 1,500 of it and all of the log, 160 + 100; w2 its
    200 / 1,500, 40. (Read as a grouping to one task, each would be sent all 200/s of jobs.)"""
    comps = (ComponentSpec("src", 1, (), True), bolt("dispatcher", 1, ("src", "default", GroupingKind.SHUFFLE)),
             bolt("w1", 1, ("dispatcher", "jobs", GroupingKind.DIRECT), ("dispatcher", "log", GroupingKind.SHUFFLE)),
             bolt("w2", 1, ("dispatcher", "jobs", GroupingKind.DIRECT)))
    tasks = [spout_task("src", 1, 0, 1000, emitted={"default": 1000}),
             task("dispatcher", 2, 1000, 1000, emitted={"jobs": 1000, "log": 500}),
             task("w1", 3, 0, 1300, executed={("dispatcher", "jobs"): 800, ("dispatcher", "log"): 500}),
             task("w2", 4, 0, 200, executed={("dispatcher", "jobs"): 200})]
    plan = size(observation(comps, tasks, seconds=10), {"src": SourceTarget("src", 200, SourceRule.CONFIGURED)},
                Limits(max_scale_factor=100))
    assert [(x.component, x.target_input_rate, x.ideal) for x in plan.sizes[1:]] == [
        ("dispatcher", 200, 1), ("w1", 260, 1), ("w2", 40, 1)]
    assert plan.size_of("dispatcher").target_output_rate == 300


def test_no_input_sizes_to_one_task_within_the_step() -> None:
    comps = chain(("src", 1), ("mid", 4), ("sink", 3))
    tasks = [spout_task("src", 1, 0, 100)] + [task("mid", t, 0, 0, source="src") for t in (2, 3, 4, 5)]
    tasks += [task("sink", t, 0, 0, source="mid") for t in (6, 7, 8)]
    obs = observation(comps, tasks)
    plan = size(obs, source_targets(obs, measure(obs), {}, 0.1), Limits())
    assert [(x.target_input_rate, x.target_output_rate, x.ideal, x.parallelism, x.bound) for x in plan.sizes[1:]] == [
        (0.0, 0.0, 1, 2, Bound.STEP), (0.0, 0.0, 1, 2, Bound.STEP)]


def test_measured_rates_stand_for_the_tasks_that_did_not_report() -> None:
    comps = chain(("src", 1), ("sink", 4))
    obs = observation(comps, [spout_task("src", 1, 600, 100), task("sink", 2, 300, 100, source="src"),
                              task("sink", 3, 100, 100, source="src")], seconds=10)
    sink = measure(obs)["sink"]
    assert (sink.measured, sink.input_rate, sink.received, sink.true_rate) == (2, 80.0, (("src", 80.0),), 2000.0)


SPEC = ComponentSpec("c", 4, ("s",), False, max_parallelism=10)


@pytest.mark.parametrize(("current", "factor", "ideal", "expected"), [
    (4, 2.0, 8, (8, Bound.NONE)), (4, 2.0, 9, (8, Bound.STEP)), (4, 2.0, 2, (2, Bound.NONE)),
    (4, 2.0, 1, (2, Bound.STEP)), (3, 2.0, 1, (2, Bound.STEP)), (3, 2.0, 7, (6, Bound.STEP)),
    (1, 2.0, 5, (2, Bound.STEP)), (1, 2.0, 0, (1, Bound.NONE)),
    # a factor too small to move a small component still moves it by one task
    (1, 1.5, 3, (2, Bound.STEP)), (4, 1.5, 9, (6, Bound.STEP)), (4, 1.5, 1, (3, Bound.STEP)),
    (2, 1.1, 1, (1, Bound.NONE)), (2, 1.1, 5, (3, Bound.STEP)), (3, 1.5, 9, (4, Bound.STEP)),
    # 50 x 2.3 and 21 / 1.4 in floating point are a hair off 115 and 15: still 115 and 15
    (50, 2.3, 200, (115, Bound.STEP)), (21, 1.4, 1, (15, Bound.STEP)),
])
def test_the_step_is_the_scale_factor_and_one_task_at_least(current: int, factor: float, ideal: int,
                                                            expected: tuple[int, Bound]) -> None:
    spec = ComponentSpec("c", current, ("s",), False)
    assert limit(spec, ideal, Limits(max_scale_factor=factor)) == expected


def test_the_absolute_limits_win_over_the_step_and_key_groups_over_everything() -> None:
    def limits(lo: int | None = None, hi: int | None = None) -> Limits:
        return Limits(2.0, PerComponent(1, (("c", lo),)) if lo else PerComponent(1),
                      PerComponent(None, (("c", hi),)) if hi else PerComponent(None))

    assert limit(SPEC, 1, limits(lo=6)) == (6, Bound.MIN)  # up from 4, though DS2 asks 1
    assert limit(SPEC, 3, limits(lo=3)) == (3, Bound.NONE)
    assert limit(SPEC, 4, limits(hi=3)) == (3, Bound.MAX)
    assert limit(SPEC, 3, limits(hi=3)) == (3, Bound.NONE)
    assert limit(SPEC, 20, Limits(max_scale_factor=5)) == (10, Bound.KEY_GROUPS)
    assert limit(SPEC, 10, Limits(max_scale_factor=5)) == (10, Bound.NONE)
    assert limit(SPEC, 4, limits(lo=12)) == (10, Bound.KEY_GROUPS)
    assert limit(SPEC, 9, Limits(2.0, PerComponent(1), PerComponent(5))) == (5, Bound.MAX)  # one number for all
    assert limit(ComponentSpec("c", 4, ("s",), False, 3), 4, Limits()) == (3, Bound.KEY_GROUPS)


def test_the_limits_apply_to_a_component_without_a_rate_too() -> None:
    obs = held(bp_ms=9000, spout_busy_ms=0)
    plan = size(obs, source_targets(obs, measure(obs), {}, 0.1),
                Limits(2.0, PerComponent(1, (("sink", 2),)), PerComponent(None, (("src", 1),))))
    assert [(x.parallelism, x.bound) for x in plan.sizes] == [(1, Bound.MAX), (2, Bound.MIN)]
