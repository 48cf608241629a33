"""heronpy's window bolts (heron_py/api/bolt/window_bolt.py) run through the component host
with a fake clock: which tuples each window gets, when they are acked, and the tick rate the
bolt sets in initialize()."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heron_py.api.bolt.window_bolt import SlidingWindowBolt, TumblingWindowBolt, WindowContext
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.common.serialization import dumps_batch
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import BoltHost, make_host
from tests.fakes import ManualClock


class Numbers(Spout):
    outputs = ["n"]

    def next_tuple(self):
        pass


class Recording:
    """Keeps every window it is handed: (WindowContext, the tuples' first values)."""

    outputs = []

    def initialize(self, config, context):
        super().initialize(config, context)
        self.windows = []

    def processWindow(self, window_info, tuples):
        self.windows.append((window_info, [t.values[0] for t in tuples]))


class Sliding(Recording, SlidingWindowBolt):
    pass


class Tumbling(Recording, TumblingWindowBolt):
    pass




def _host(bolt, config):
    b = TopologyBuilder("w")
    s = b.add_spout("numbers", Numbers, par=1)
    b.add_bolt("win", bolt, par=1, inputs={s: Grouping.SHUFFLE}, config=config)
    topo = b.build()
    plan = PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)
    host = make_host(plan, plan.packing.tasks_of("win")[0], [].extend)
    assert isinstance(host, BoltHost)
    clock = ManualClock(1000.0)
    host.user.clock = clock
    host.initialize()
    return host, clock, plan.packing.tasks_of("numbers")[0]


def _send(host, src, *values):
    host.process_body(src, dumps_batch([("default", [v]) for v in values]))


def test_sliding_window_sets_its_tick_in_initialize_and_slides():
    host, clock, src = _host(Sliding, {SlidingWindowBolt.WINDOW_DURATION_SECS: 10,
                                       SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS: 2})
    assert host.tick_s == 2  # read after initialize(), where the bolt set it
    _send(host, src, 1, 2)  # seen at 1000
    clock.now = 1005
    _send(host, src, 3)
    host.tick()
    assert host.user.windows[-1] == (WindowContext(995, 1005), [1, 2, 3])
    assert host.metrics.acked == 0
    clock.now = 1011  # 1000 is now more than 10 s ago: 1 and 2 leave the window, acked
    host.tick()
    assert host.user.windows[-1] == (WindowContext(1001, 1011), [1, 2, 3])  # heronpy expires after the call
    assert host.metrics.acked == 2
    clock.now = 1013
    host.tick()
    assert host.user.windows[-1] == (WindowContext(1003, 1013), [3])
    clock.now = 1016
    host.tick()
    assert host.user.windows[-1] == (WindowContext(1006, 1016), [3]) and host.metrics.acked == 3


def test_tumbling_window_hands_over_each_batch_once_and_acks_it():
    host, clock, src = _host(Tumbling, {TumblingWindowBolt.WINDOW_DURATION_SECS: 5})
    assert host.tick_s == 5
    _send(host, src, 1, 2, 3)
    clock.now = 1005
    host.tick()
    _send(host, src, 4)
    clock.now = 1010
    host.tick()
    host.tick()
    assert host.user.windows == [(WindowContext(1000, 1005), [1, 2, 3]), (WindowContext(1005, 1010), [4]),
                                 (WindowContext(1005, 1010), [])]
    assert host.metrics.acked == 4


@pytest.mark.parametrize("bolt, config, error", [
    (Sliding, {}, "Sliding: config slidingwindowbolt_duration_secs: expected a window length in whole seconds >= 1, "
                  "found None"),
    (Sliding, {SlidingWindowBolt.WINDOW_DURATION_SECS: 2, SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS: 5},
     "Sliding: config slidingwindowbolt_slideinterval_secs (5) must not be above slidingwindowbolt_duration_secs (2)"),
    (Tumbling, {TumblingWindowBolt.WINDOW_DURATION_SECS: "soon"},
     "Tumbling: config tumblingwindowbolt_duration_secs: expected a window length in whole seconds >= 1, "
     "found 'soon'"),
])
def test_bad_window_config_is_one_clear_error(bolt, config, error):
    with pytest.raises(ValueError) as e:
        _host(bolt, config)
    assert str(e.value) == error


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.booleans()), min_size=1, max_size=40),
       st.integers(1, 10), st.integers(1, 10))
def test_sliding_windows_property(events, duration, slide):
    """Steps of the clock with a tuple or a tick: a window holds exactly the tuples seen at most
    ``duration`` s before the last expiry (heronpy expires on every tuple and after every
    tick), each tuple is acked exactly once, when it is older than the window, and never
    before it was in a window's range."""
    slide = min(slide, duration)
    host, clock, src = _host(Sliding, {SlidingWindowBolt.WINDOW_DURATION_SECS: duration,
                                       SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS: slide})
    seen: dict[int, int] = {}
    last_expiry = None
    t = 1000
    for i, (step, is_tick) in enumerate(events):
        t += step
        clock.now = t
        if is_tick:
            host.tick()
            info, values = host.user.windows[-1]
            assert info == WindowContext(t - duration, t)
            expected = [v for v, ts in sorted(seen.items()) if last_expiry is None or ts >= last_expiry - duration]
            assert values == expected
        else:
            _send(host, src, i)
            seen[i] = t
        last_expiry = t
        # every tuple older than the window at the last expiry has been acked, and no other
        assert host.metrics.acked == sum(1 for ts in seen.values() if t - duration > ts)
    clock.now = t + duration + 1
    host.tick()
    assert host.metrics.acked == len(seen)
