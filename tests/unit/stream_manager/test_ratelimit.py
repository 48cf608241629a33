"""Heron's per-component output rate (topology.component.output.bps): the token bucket, the
rates a plan gives each local task, and the instance connections' reading under both holds
(the rate and backpressure), on a fake clock and fake connections."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from heron_py.common.config import ConfigError, check_topology_config
from heron_py.testing import ManualClock
from stream_manager.instances import LocalInstances
from stream_manager.ratelimit import TokenBucket, output_rates
from tests.fakes import FakeConn, word_count_plan


def test_a_full_bucket_lets_one_and_a_half_seconds_of_rate_through_then_asks_to_wait_out_the_debt():
    b = TokenBucket.full(1000.0, now=0.0)
    assert b.take(1500, 0.0) == 0.0  # Heron's burst: 1.5 x the rate
    assert b.take(500, 0.0) == pytest.approx(0.5)  # 500 bytes of debt at 1,000 B/s
    assert b.take(0, 0.5) == 0.0  # paid off
    assert b.take(100, 0.75) == 0.0  # 0.25 s refilled 250


def test_a_quiet_task_saves_up_no_more_than_the_burst():
    b = TokenBucket.full(1000.0, now=0.0)
    b.take(1500, 0.0)
    assert b.take(1500, 100.0) == 0.0
    assert b.take(1, 100.0) == pytest.approx(0.001)


def test_a_frame_larger_than_the_burst_is_counted_and_waited_out_in_full():
    b = TokenBucket.full(100.0, now=0.0)
    assert b.take(1150, 0.0) == pytest.approx(10.0)  # 1,000 bytes beyond the 150 of burst


def _plan(topology_config: dict[str, object], **component_configs: dict[str, object]):
    plan = word_count_plan()  # words: tasks 1 (container 0), 2 (container 1); count: 3 (c0), 4, 5 (c1)
    comps = tuple(dataclasses.replace(c, config=component_configs.get(c.name, {})) for c in plan.topology.components)
    topo = dataclasses.replace(plan.topology, components=comps, config=topology_config)
    return dataclasses.replace(plan, topology=topo)


def test_a_components_rate_is_split_evenly_over_its_tasks_and_only_local_tasks_get_one():
    plan = _plan({}, words={"topology.component.output.bps": "1000"})
    assert output_rates(plan, 0) == {1: 500.0}
    assert output_rates(plan, 1) == {2: 500.0}


def test_the_topologys_value_applies_to_every_component_unless_the_component_sets_its_own():
    plan = _plan({"topology.component.output.bps": "3000"}, words={"topology.component.output.bps": "-1"})
    assert output_rates(plan, 1) == {4: 1000.0, 5: 1000.0}  # words: -1, no limit; count: 3,000 / 3


def test_a_zero_or_a_non_number_is_refused_at_submit_naming_the_component():
    with pytest.raises(ConfigError) as e:
        check_topology_config({}, {"words": {"topology.component.output.bps": "0"}})
    assert str(e.value) == ("component 'words': config topology.component.output.bps: expected -1 (no limit) or "
                            "an integer > 0 (bytes per second), found '0'")
    with pytest.raises(ConfigError) as e:
        check_topology_config({"topology.component.output.bps": "fast"}, {})
    assert str(e.value) == ("config topology.component.output.bps: expected an integer (bytes per second) >= -1, "
                            "found 'fast'")
    with pytest.raises(ConfigError) as e:
        output_rates(_plan({}, count={"topology.component.output.bps": "-5"}), 0)
    assert str(e.value) == ("component 'count': config topology.component.output.bps: expected an integer (bytes "
                            "per second) >= -1, found '-5'")


def _instances(*tasks: int) -> tuple[LocalInstances, dict[int, FakeConn], ManualClock]:
    clock = ManualClock(0.0)
    inst = LocalInstances(logging.getLogger("test"), clock)
    conns = {t: FakeConn() for t in tasks}
    for t, c in conns.items():
        inst.add(c, t, 100 + t)  # type: ignore[arg-type]
    return inst, conns, clock


def test_a_task_over_its_rate_is_not_read_until_its_wait_is_over_and_only_it():
    inst, conns, clock = _instances(1, 3)
    inst.set_rates({1: 1000.0})
    assert inst.meter(1, 1500) == 0.0 and conns[1].reading
    assert inst.meter(3, 10**9) == 0.0 and conns[3].reading  # no limit on task 3
    clock.now = 0.1
    assert inst.meter(1, 250) == pytest.approx(0.15)  # 150 bytes of debt
    assert not conns[1].reading and inst.rate_pauses == {1: 1}
    assert inst.meter(1, 100) == 0.0  # bytes already buffered add to the debt; one wait asked
    inst.rate_wait_over(1)
    assert conns[1].reading


def test_neither_hold_resumes_what_the_other_paused():
    inst, conns, _clock = _instances(1)
    inst.set_rates({1: 1000.0})
    inst.meter(1, 2000)
    inst.set_reading([1], paused=True)  # backpressure holds the spout too
    inst.set_reading([1], paused=False)  # backpressure over: the rate still holds it
    assert not conns[1].reading
    inst.set_reading([1], paused=True)
    inst.rate_wait_over(1)  # the rate's wait over: backpressure still holds it
    assert not conns[1].reading
    inst.set_reading([1], paused=False)
    assert conns[1].reading


def test_a_plan_that_lifts_the_limit_reads_a_waiting_task_again_and_an_unchanged_rate_keeps_its_debt():
    inst, conns, clock = _instances(1, 3)
    inst.set_rates({1: 1000.0, 3: 10.0})
    inst.meter(1, 2000)
    inst.meter(3, 2000)
    clock.now = 1.0
    inst.set_rates({3: 10.0})
    assert conns[1].reading and not conns[3].reading
    assert inst.buckets[3].tokens < 0 and 1 not in inst.buckets


def test_a_task_that_registers_again_while_waiting_is_not_read_on_its_new_connection():
    inst, conns, _clock = _instances(1)
    inst.set_rates({1: 1000.0})
    inst.meter(1, 2000)
    again = FakeConn()
    inst.add(again, 1, 200)  # type: ignore[arg-type]
    assert conns[1].closed == "task 1 registered again on a new connection"
    assert not again.reading
    inst.rate_wait_over(1)
    assert again.reading
