"""DS2's sizing (heron_py/elastic/sizing.py) on examples computed by hand, its sources' rule, and
the limits."""

from __future__ import annotations

import pytest

from heron_py.elastic.config import PerComponent
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

from .windows import chain, container, observation, spout_task, task

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


def test_each_edge_carries_its_observed_share_of_the_upstreams_output() -> None:
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


def test_an_upstream_that_sent_nothing_passes_its_whole_target_on() -> None:
    comps = chain(("src", 1), ("sink", 1))
    obs = observation(comps, [spout_task("src", 1, 0, 0), task("sink", 2, 0, 0, source="src")])
    plan = size(obs, {"src": SourceTarget("src", 500, SourceRule.CONFIGURED)}, Limits())
    assert (plan.size_of("sink").target_input_rate, plan.size_of("sink").bound) == (500, Bound.UNKNOWN)


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
