"""The health manager's decisions (heron_py/elastic/policy.py) over sequences of observations: a
fluid model of a word count (tests/unit/elastic/sim.py) answers each action as the topology
would, and the policy is judged on what it does next."""

from __future__ import annotations

import dataclasses

import pytest

from heron_py.elastic.config import AutoscaleConfig, ConfigError
from heron_py.elastic.diagnosis import Kind
from heron_py.elastic.observations import ComponentSpec, TopologyObservation
from heron_py.elastic.policy import (
    MIN_GAIN,
    Blacklisted,
    Decision,
    HealthPolicy,
    Move,
    NoAction,
    RestartContainer,
    Scale,
    State,
    Taken,
)
from heron_py.planner.model import GroupingKind

from .sim import Sim, Stage
from .windows import bolt, chain, container, observation, spout_task, task, trace_observation

ON = AutoscaleConfig(enabled=True)


def word_count(offered: float = 1000, count: int = 1, *, scaling: float = 1.0,
               weights: list[float] | None = None) -> Sim:
    """sentences read up to 5,000/s; split takes 20,000 sentences/s a task and emits 8 words each;
    count takes 10,000 words/s a task. At 1,000 sentences/s count needs 1 task; at 4,000, 4."""
    return Sim([Stage("sentences", 5000), Stage("split", 20_000, 8), Stage("count", 10_000, 0, scaling, weights)],
               {"sentences": 1, "split": 1, "count": count}, offered)


def step(policy: HealthPolicy, sim: Sim, now: float, *, apply: bool = True) -> Decision:
    """One decision on the sim's window ending now; a Scale is carried out before the next one."""
    d = policy.decide(sim.observe(), now)
    (action,) = d.actions
    if apply and isinstance(action, Scale):
        sim.apply(dict(action.parallelism))
    return d


def run(policy: HealthPolicy, sim: Sim, start: float, n: int) -> list[tuple[float, Scale]]:
    """``n`` decisions 30 s apart from ``start``; the scales taken, with when."""
    out = []
    for i in range(n):
        now = start + 30 * i
        (action,) = step(policy, sim, now).actions
        if isinstance(action, Scale):
            out.append((now, action))
    return out


def test_an_input_step_up_and_back_down_converges_in_two_actions_each_way() -> None:
    sim, policy = word_count(), HealthPolicy(ON)
    assert run(policy, sim, 30, 3) == []
    sim.offered = 4000
    ups = run(policy, sim, 120, 12)
    assert [(t, dict(a.parallelism)) for t, a in ups] == [(120, {"count": 2}), (180, {"count": 4})]
    assert sim.parallelism == {"sentences": 1, "split": 1, "count": 4}
    assert sim.flow()[1] is None  # nothing binds: the topology keeps up with 4,000/s
    assert ups[0][1].why == (
        "count is under-provisioned: its tasks were busy 100% of the window; stream manager 1 was in backpressure 60% "
        "of the 30 s window (threshold 10%); behind it: count 60%; count: target input 40,000/s, one task's true "
        "rate 10,000/s; DS2 asks 4; 1 -> 2 (the max scale factor)")
    sim.offered = 1000
    downs = run(policy, sim, 480, 12)
    assert [(t, dict(a.parallelism)) for t, a in downs] == [(480, {"count": 2}), (540, {"count": 1})]
    assert downs[1][1].why == ("count goes on toward DS2's 1 (the last step stopped at 2, the max scale factor); "
                               "count: target input 8,000/s, one task's true rate 10,000/s; DS2 asks 1; 2 -> 1")
    assert [(h.time, h.before, h.throughput, h.clamped) for h in policy.history] == [
        (120, (("count", 1),), 1250, (("count", Move.UP),)), (180, (("count", 2),), 2500, ()),
        (480, (("count", 4),), 1000, (("count", Move.DOWN),)), (540, (("count", 2),), 1000, ())]
    final = step(policy, sim, 840)
    assert (final.actions, final.diagnoses, final.state) == (
        (NoAction("no diagnosis: the topology keeps its sizes"),), (), State.READY)
    assert final.sizing is not None and final.sizing.changes() == {}
    assert policy.blacklist(840) == ()


def test_a_step_cut_short_goes_on_only_in_the_decision_that_judges_it() -> None:
    sim, policy = word_count(1000, count=4), HealthPolicy(ON)
    assert [dict(a.parallelism) for _, a in run(policy, sim, 30, 2)] == [{"count": 2}]  # 30: scaled, 60: cooldown
    sim.offered = 2000  # judged at 90 while DS2 asks 2: nothing to go on with
    assert step(policy, sim, 90).actions == (NoAction("no diagnosis: the topology keeps its sizes"),)
    sim.offered = 1000  # DS2 asks 1 again; count, 40% busy, has no diagnosis, and the step was judged
    assert run(policy, sim, 120, 10) == []
    sim, policy = word_count(1000, count=4), HealthPolicy(ON)
    run(policy, sim, 30, 2)
    assert step(policy, sim, 90).actions == (Scale((("count", 1),), (
        "count goes on toward DS2's 1 (the last step stopped at 2, the max scale factor); count: target input "
        "8,000/s, one task's true rate 10,000/s; DS2 asks 1; 2 -> 1")),)


def test_a_step_goes_on_only_in_its_own_direction() -> None:
    sim, policy = word_count(4000), HealthPolicy(ON)
    assert [dict(a.parallelism) for _, a in run(policy, sim, 30, 2)] == [{"count": 2}]  # cut short at 2 of 4
    sim.offered = 1000  # count at 2 is 40% busy: DS2 asks 1, but the step was up
    assert run(policy, sim, 90, 10) == []


def test_the_cooldown_holds_every_action_until_it_has_passed() -> None:
    sim, policy = word_count(4000), HealthPolicy(ON)
    assert isinstance(step(policy, sim, 120).actions[0], Scale)
    assert policy.state is State.AWAITING_PLAN
    d = step(policy, sim, 150)  # the plan runs: seen, then the cooldown
    assert (d.actions, d.state) == ((NoAction("cooldown: 30 s left of 60 s after the action at 120"),),
                                    State.SETTLING)
    assert [x.kind for x in d.diagnoses] == [Kind.UNDER_PROVISIONED]  # diagnosed while waiting, all the same
    assert step(policy, sim, 179.5).actions == (NoAction("cooldown: 0.5 s left of 60 s after the action at 120"),)
    assert isinstance(step(policy, sim, 180).actions[0], Scale)


def test_wall_clock_times_read_in_full() -> None:
    sim, policy = word_count(4000), HealthPolicy(ON)
    step(policy, sim, 1_733_500_000.25)
    assert step(policy, sim, 1_733_500_030.5).actions == (NoAction(
        "cooldown: 29.75 s left of 60 s after the action at 1733500000.25"),)


def test_a_whole_window_after_the_new_plan_is_awaited() -> None:
    sim, policy = word_count(4000), HealthPolicy(AutoscaleConfig(enabled=True, cooldown_secs=0))
    step(policy, sim, 100)
    assert step(policy, sim, 110).actions == (NoAction(
        "waiting for a whole window after the new plan: this one began at 80, the plan ran from 110"),)
    assert step(policy, sim, 139.5).actions == (NoAction(
        "waiting for a whole window after the new plan: this one began at 109.5, the plan ran from 110"),)
    d = step(policy, sim, 140)
    assert isinstance(d.actions[0], Scale) and d.state is State.AWAITING_PLAN


def test_a_plan_that_does_not_appear_is_awaited_then_given_up_and_blacklisted() -> None:
    sim, policy = word_count(4000), HealthPolicy(ON)
    step(policy, sim, 0, apply=False)
    assert step(policy, sim, 30, apply=False).actions == (NoAction(
        "waiting for the new plan (count 2) asked for at 0; running: count 1"),)
    assert step(policy, sim, 599, apply=False).state is State.AWAITING_PLAN
    d = step(policy, sim, 600, apply=False)
    assert (d.actions, d.state) == ((NoAction("the plan asked for at 0 did not appear within 600 s: given up"),),
                                    State.READY)
    assert policy.blacklist(600) == (Blacklisted(
        "count", Move.UP, 1200, "the plan asked for at 0 did not appear within 600 s"),)
    assert step(policy, sim, 630).actions == (NoAction(
        "count is under-provisioned: its tasks were busy 100% of the window; stream manager 1 was in backpressure "
        "60% of the 30 s window (threshold 10%); behind it: count 60%; count keeps 1: scaling it up is blacklisted "
        "until 1200 (the plan asked for at 0 did not appear within 600 s); count: target input 40,000/s, one task's "
        "true rate 10,000/s; DS2 asks 4; 1 -> 2 (the max scale factor)"),)


def test_a_scale_down_given_up_blacklists_scaling_down() -> None:
    sim, policy = word_count(1000, count=4), HealthPolicy(ON)
    step(policy, sim, 0, apply=False)
    step(policy, sim, 600, apply=False)
    assert [(b.target, b.move) for b in policy.blacklist(600)] == [("count", Move.DOWN)]


def shared_count(scaling: float) -> Sim:
    """count writes to one store: each task past the first adds ``scaling`` of one task's speed."""
    return word_count(4000, scaling=scaling)


def test_a_scale_up_that_did_not_help_is_blacklisted_for_the_blacklist_period() -> None:
    sim, policy = shared_count(0.0), HealthPolicy(ON)
    assert [dict(a.parallelism) for _, a in run(policy, sim, 30, 3)] == [{"count": 2}]
    bl = Blacklisted("count", Move.UP, 690, "scaling count up from 1 to 2 at 30 did not help: it is still "
                                            "under-provisioned, and the throughput went from 1,250 to 1,250 records/s")
    assert policy.blacklist(90) == (bl,)
    d = step(policy, sim, 120)
    assert d.actions == (NoAction(
        "count is under-provisioned: its tasks were busy 100%, 100% of the window; stream manager 1 was in "
        "backpressure 60% of the 30 s window (threshold 10%); behind it: count 60%; count keeps 2: scaling it up is "
        f"blacklisted until 690 ({bl.why}); count: target input 40,000/s, one task's true rate 5,000/s; DS2 asks 8; "
        "2 -> 4 (the max scale factor)"),)
    assert run(policy, sim, 150, 18) == []  # 150 .. 660
    assert policy.blacklist(689.9) == (bl,) and policy.blacklist(690) == ()
    (action,) = step(policy, sim, 690).actions
    assert isinstance(action, Scale) and dict(action.parallelism) == {"count": 4}


def test_a_throughput_gain_of_min_gain_is_help_and_less_is_not() -> None:
    assert MIN_GAIN == 0.05
    sim, policy = shared_count(0.05), HealthPolicy(ON)  # 1,250 -> 1,312.5 records/s: exactly 5% more
    scales = run(policy, sim, 30, 3)
    assert [dict(a.parallelism) for _, a in scales] == [{"count": 2}, {"count": 4}]
    assert policy.blacklist(90) == ()
    sim, policy = shared_count(0.0499), HealthPolicy(ON)
    assert [dict(a.parallelism) for _, a in run(policy, sim, 30, 3)] == [{"count": 2}]
    assert [b.target for b in policy.blacklist(90)] == ["count"]


def test_a_scale_up_whose_component_took_more_helped_though_the_sources_did_not_gain() -> None:
    """A spout emitting freely into a backlog shows no gain at the sources after a scale that
    helped; the scaled component taking more records per second does (seen live: a count scaled
    1 -> 2 read "did not help, 45 -> 45" and was blacklisted)."""
    def held_sources(obs: TopologyObservation, out: dict[int, float]) -> TopologyObservation:
        return dataclasses.replace(obs, tasks=tuple(
            dataclasses.replace(t, records_out=out[t.task]) if t.task in out else t for t in obs.tasks))

    for scaling, blacklisted in ((1.0, []), (0.0, ["count"])):
        sim, policy = word_count(4000, scaling=scaling), HealthPolicy(ON)
        first = sim.observe()
        spouts = {t.task: t.records_out for t in first.tasks if t.component == "sentences"}
        (action,) = policy.decide(first, 30).actions
        assert isinstance(action, Scale) and dict(action.parallelism) == {"count": 2}
        sim.apply({"count": 2})
        for now in (60, 90):
            d = policy.decide(held_sources(sim.observe(), spouts), now)
            for a in d.actions:
                if isinstance(a, Scale):
                    sim.apply(dict(a.parallelism))
        assert [b.target for b in policy.blacklist(90)] == blacklisted, scaling


def test_a_scale_up_that_left_the_component_healthy_is_not_blacklisted_even_without_gain() -> None:
    sim, policy = word_count(4000), HealthPolicy(ON)
    step(policy, sim, 30)
    sim.offered = 1250  # the input fell as count grew: no gain, but no symptom either
    run(policy, sim, 60, 2)
    assert policy.blacklist(90) == ()


def test_a_scale_down_that_left_the_component_under_provisioned_is_blacklisted() -> None:
    sim, policy = word_count(1000, count=4), HealthPolicy(ON)
    assert [dict(a.parallelism) for _, a in run(policy, sim, 30, 1)] == [{"count": 2}]
    sim.stage("count").capacity = 3000  # now 2 tasks take 6,000 words/s of the 8,000 sent
    (action,) = step(policy, sim, 60).actions
    assert action == NoAction("cooldown: 30 s left of 60 s after the action at 30")
    (action,) = step(policy, sim, 90).actions
    assert isinstance(action, Scale) and dict(action.parallelism) == {"count": 4}
    assert policy.blacklist(90) == (Blacklisted(
        "count", Move.DOWN, 690, "scaling count down from 4 to 2 at 30 left it under-provisioned"),)
    sim.stage("count").capacity = 10_000  # idle again: but scaling down is blacklisted
    run(policy, sim, 120, 2)
    (action,) = step(policy, sim, 180).actions
    assert action == NoAction(
        "count is over-provisioned: its 4 tasks were busy 20%, 20%, 20%, 20% of the 30 s window (all below 30%), "
        "without backpressure; count keeps 4: scaling it down is blacklisted until 690 (scaling count down from 4 to 2 "
        "at 30 left it under-provisioned); count: target input 8,000/s, one task's true rate 10,000/s; DS2 asks 1; "
        "4 -> 2 (the max scale factor)")


def test_skew_never_scales() -> None:
    obs, policy = trace_observation("skew.json"), HealthPolicy(ON)
    for now in range(30, 1200, 30):
        d = policy.decide(obs, now)
        assert d.actions == (NoAction(
            "no diagnosis that scaling resolves: task 4 of count received 50,400 records in the 30 s window, 7.0 "
            "times its peers' median 7,150 (2 times at most): more tasks do not spread a hot key"),)
        assert d.sizing is not None and d.sizing.changes() == {"split": 1, "count": 8}  # what DS2 alone would do
    assert (policy.history, policy.state) == ((), State.READY)
    sim = word_count(4000, count=4, weights=[0.7, 0.1, 0.1, 0.1])  # the hot key holds the topology back
    assert sim.flow()[1] == "count"
    policy = HealthPolicy(ON)
    assert [d.kind for d in step(policy, sim, 30).diagnoses] == [Kind.DATA_SKEW]
    assert run(policy, sim, 60, 20) == []


def test_a_skewed_component_keeps_its_size_while_the_rest_of_the_graph_scales() -> None:
    comps = chain(("src", 1), ("split", 1), ("count", 3))
    tasks = [spout_task("src", 1, 30_000, 6000, blocked_ms=24_000),
             task("split", 2, 30_000, 29_900, out=240_000, source="src", queue=50, container=1),
             task("count", 3, 168_000, 29_000, source="split", queue=60, container=1),
             task("count", 4, 36_000, 6000, source="split", container=2),
             task("count", 5, 36_000, 6000, source="split", container=2)]
    obs = observation(comps, tasks, [container(1, 20_000, split=12_000, count=15_000)])
    d = HealthPolicy(ON).decide(obs, 30)
    (action,) = d.actions
    assert isinstance(action, Scale) and dict(action.parallelism) == {"split": 2}
    assert action.why.endswith("; count keeps 3: its input is skewed, and more tasks do not spread a hot key")
    assert sorted(x.kind.value for x in d.diagnoses) == ["data skew", "under-provisioned"]


def test_a_slow_instance_restarts_its_container_once_and_not_again_if_that_did_not_help() -> None:
    slow, policy = trace_observation("slow_task.json"), HealthPolicy(ON)
    d = policy.decide(slow, 30)
    assert d.actions == (RestartContainer(3, d.diagnoses[0].explanation),)
    assert (d.state, policy.history) == (State.SETTLING, (Taken(30, d.actions[0], (), 1000.0),))
    assert policy.decide(slow, 60).actions == (NoAction("cooldown: 30 s left of 60 s after the action at 30"),)
    d = policy.decide(slow, 90)
    assert d.actions == (NoAction(
        "no diagnosis that scaling resolves: task 9 of count is slow: 2,013 records/s of useful time against its "
        "peers' median 6,057 (below 50%) on similar input (60,000 records against 60,000); stream manager 3 was in "
        "backpressure 54% of the 30 s window (threshold 10%); behind it: count 54%: restart container 3"),)
    assert [(b.target, b.move, b.until) for b in policy.blacklist(90)] == [("container 3", Move.RESTART, 690)]
    assert policy.blacklist(90)[0].why.startswith("restarting container 3 at 30 did not help: task 9 of count is slow")


def test_a_backlog_without_backpressure_scales_to_keep_up_at_once() -> None:
    """count executed 60% of what split sent it, with no backpressure yet: one step sizes it for
    all it is sent (tests/unit/elastic/test_sizing.py has the figures)."""
    d = HealthPolicy(ON).decide(trace_observation("backlog_no_backpressure.json"), 30)
    assert d.actions == (Scale((("count", 4),), (
        "count is under-provisioned: its tasks were busy 99%, 99% of the window; task 3 of count has 64 batches of "
        "input pending (over 32); count: target input 8,000/s, one task's true rate 2,422/s; DS2 asks 4; 2 -> 4")),)


def test_an_all_grouped_component_behind_its_input_is_diagnosed_but_not_scaled() -> None:
    """Every task of cache takes all of the rules (100/s) and executes 80/s: under-provisioned,
    and more tasks would each fall behind the same way."""
    comps = (ComponentSpec("rules", 1, (), True), bolt("cache", 3, ("rules", "default", GroupingKind.ALL)))
    tasks = [spout_task("rules", 1, 0, 3000, emitted={"default": 3000})]
    tasks += [task("cache", t, 0, 30_000, executed={("rules", "default"): 2400}, queue=50) for t in (2, 3, 4)]
    d = HealthPolicy(ON).decide(observation(comps, tasks), 30)
    assert [(x.kind, x.component) for x in d.diagnoses] == [(Kind.UNDER_PROVISIONED, "cache")]
    (action,) = d.actions
    assert isinstance(action, NoAction) and action.why.endswith(
        "; cache: target input 300/s (100/s of it to every task, all grouped), one task's true rate 80/s; DS2 "
        "cannot size it; 3 -> 3 (every task takes its all-grouped input whole, which more tasks do not share)")


def test_a_restart_that_cured_the_slow_task_is_not_blacklisted() -> None:
    policy = HealthPolicy(ON)
    policy.decide(trace_observation("slow_task.json"), 30)
    policy.decide(trace_observation("over_provisioned_idle.json"), 90)
    assert policy.blacklist(90) == ()


def test_disabled_it_diagnoses_and_never_acts() -> None:
    policy = HealthPolicy(AutoscaleConfig())
    for name in ("under_provisioned_backpressure.json", "slow_task.json", "over_provisioned_idle.json"):
        d = policy.decide(trace_observation(name), 30)
        assert d.actions == (NoAction("heron_py.autoscale.enabled is false: diagnoses only"),)
        assert d.diagnoses and d.state is State.READY
    assert policy.history == ()


def pending_only(queue: float) -> TopologyObservation:
    """count's queue fills though its tasks are half idle and the source runs freely: DS2 says fewer."""
    comps = chain(("src", 1), ("count", 3))
    tasks = [spout_task("src", 1, 3000, 3000)]
    tasks += [task("count", t, 1000, 10_000, source="src", queue=queue) for t in (2, 3, 4)]
    return observation(comps, tasks)


def test_a_component_is_not_moved_against_its_own_diagnosis() -> None:
    d = HealthPolicy(ON).decide(pending_only(40), 30)
    assert d.actions == (NoAction(
        "count is under-provisioned: its tasks were busy 33%, 33%, 33% of the window; task 2 of count has 40 batches "
        "of input pending (over 32); count keeps 3: DS2 would make it 2, but it is under-provisioned; count: target "
        "input 100/s, one task's true rate 100/s; DS2 asks 1; 3 -> 2 (the max scale factor)"),)


def test_configured_target_rates_size_the_graph_without_a_symptom() -> None:
    cfg = AutoscaleConfig(enabled=True, target_rates=(("sentences", 4000.0),))
    sim, policy = word_count(1000), HealthPolicy(cfg)
    scales = run(policy, sim, 30, 4)
    assert [dict(a.parallelism) for _, a in scales] == [{"count": 2}, {"count": 4}]
    assert scales[0][1].why == ("count is sized for the configured target rates; count: target input 32,000/s, one "
                                "task's true rate 10,000/s; DS2 asks 4; 1 -> 2 (the max scale factor)")
    assert run(policy, sim, 150, 4) == []
    # a component both diagnosed and off its configured size is explained by its diagnosis
    sim, policy = word_count(4000), HealthPolicy(cfg)
    (action,) = step(policy, sim, 30).actions
    assert isinstance(action, Scale) and action.why.startswith("count is under-provisioned: its tasks were busy 100%")


def test_settings_naming_what_the_topology_lacks_are_refused_at_the_decision() -> None:
    policy = HealthPolicy(AutoscaleConfig(enabled=True, target_rates=(("split", 10.0),)))
    with pytest.raises(ConfigError) as e:
        policy.decide(word_count().observe(), 30)
    assert str(e.value) == ("config heron_py.autoscale.target.rate: expected source components (sentences), "
                            "found 'split'")
