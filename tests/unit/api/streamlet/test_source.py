"""A Streamlet source per batch (source.py, SourceSpout in components.py) and the element
operators fused into its spout (graph.fuse): the batch's size rule, the Generator's None
contract, element-for-element equality with the unfused run, a raising function failing only
its element, the bound that keeps backpressure effective, and the per-operator metrics. All
through the real plan, emitter and hosts, in this process (issue 39)."""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest

from heron_py.api.streamlet import components as comp
from heron_py.api.streamlet import source
from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.generator import Generator
from heron_py.api.streamlet.runner import build_topology
from heron_py.common.serialization import ONE
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import HostOptions, SpoutHost, make_host
from heron_py.testing import ManualClock, run_in_process
from tests.fakes import HostPipeline, Items

SENTENCES = [f"w{i % 7} x{i % 3} the end" if i % 5 else "" for i in range(300)]


def config(fusion: bool) -> Config:
    c = Config()
    c.set_fusion(fusion)
    return c


def plan_of(builder: Builder, fusion: bool) -> PhysicalPlan:
    topo = build_topology("s", config(fusion), builder)
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)


# --- the batch's size, pure -----------------------------------------------------------------------


def test_the_batch_doubles_while_it_fills_fast_up_to_the_limit():
    sizer = source.BatchSizer(source.BatchLimits(max_elements=8, target_s=0.002))
    sizes = []
    for _ in range(6):
        sizes.append(sizer.size)
        sizer.observe(sizer.size, 0.0005)
    assert sizes == [1, 2, 4, 8, 8, 8]


def test_a_slow_batch_halves_and_a_batch_ended_by_none_keeps_the_size():
    sizer = source.BatchSizer(source.BatchLimits(max_elements=64, target_s=0.002))
    for _ in range(5):
        sizer.observe(sizer.size, 0.0)
    assert sizer.size == 32
    sizer.observe(3, 0.0001)  # the source had 3 of 32: nothing said about speed
    assert sizer.size == 32
    sizer.observe(32, 0.0015)  # filled, but not in under half the target: no growth
    assert sizer.size == 32
    sizer.observe(32, 0.005)
    sizer.observe(16, 0.005)
    assert sizer.size == 8
    for _ in range(10):
        sizer.observe(1, 1.0)
    assert sizer.size == 1


@pytest.mark.parametrize(("kw", "message"), [
    ({"max_elements": 0}, "streamlet source batch: max_elements: expected an int >= 1, found 0"),
    ({"target_s": -1.0}, "streamlet source batch: target_s: expected seconds > 0, found -1.0"),
])
def test_bad_limits_give_one_line(kw, message):
    with pytest.raises(ValueError) as e:
        source.BatchLimits(**kw)
    assert str(e.value) == message


# --- the Generator's contract ---------------------------------------------------------------------


class Odd:
    """An element whose == cannot answer (as a numpy array's): only identity says it is not None."""

    def __eq__(self, other: object) -> bool:
        raise TypeError("no ==")

    __hash__ = object.__hash__


def test_a_generator_batch_ends_at_the_first_none_which_is_consumed():
    items: list[Any] = [1, 2, None, 3, None, None, 4]
    calls = []

    def get():
        calls.append(1)
        return items.pop(0) if items else None

    out: list[Any] = []
    source.fill_generator(get, 10, out)
    assert out == [1, 2] and len(calls) == 3
    out.clear()
    source.fill_generator(get, 10, out)
    assert out == [3]
    source.fill_generator(get, 10, out)
    assert out == [3]  # a None first: nothing, one call
    odd = Odd()
    items[:] = [odd, 0, "", False]
    source.fill_generator(get, 4, out)
    assert len(out) == 5 and out[1] is odd and out[2:] == [0, "", False]


def test_a_raising_get_keeps_what_it_gave_before_and_the_error_propagates():
    it = iter([1, 2])

    def get():
        v = next(it, None)
        if v is None:
            raise OSError("source gone")
        return v

    out: list[Any] = []
    with pytest.raises(OSError, match="source gone"):
        source.fill_generator(get, 10, out)
    assert out == [1, 2]


def test_a_raising_generator_in_the_spout_sends_what_came_before_then_ends_the_task():
    class Breaks(Generator):
        def setup(self, context: Any) -> None:
            self.left = ["a b", "c"]

        def get(self) -> Any:
            if not self.left:
                raise OSError("source gone")
            return self.left.pop(0)

    host = spout_host(Breaks(), True, ManualClock())
    host.next_tuples(1)  # "a b": a batch of one
    with pytest.raises(OSError, match="source gone"):
        host.next_tuples(1)  # a batch of two: "c", then the error
    assert host.emitter.emitted == 3


def test_a_supplier_batch_keeps_none():
    values = iter([None, 1, None])
    out: list[Any] = []
    source.fill_supplier(lambda: next(values), 3, out)
    assert out == [None, 1, None]


# --- the fused source, through the hosts ----------------------------------------------------------


def upper_unless_boom(word: str) -> str:
    if word == "boom":
        raise ValueError("no boom")
    return word.upper()


def program(b: Builder, items: list[Any]) -> None:
    b.new_source(Items(items)).flat_map(str.split).map(upper_unless_boom).filter(lambda w: w != "THE") \
        .repartition(1).set_name("out")


def test_the_fused_source_outputs_what_the_unfused_one_outputs_element_for_element():
    runs = {}
    for fusion in (False, True):
        b = Builder()
        program(b, SENTENCES)
        runs[fusion] = [v[0] for v in run_in_process(build_topology("s", config(fusion), b),
                                                        capture=["out"]).values("out")]
    assert runs[True] == runs[False]
    assert len(runs[True]) == sum(len([w for w in s.split() if w != "the"]) for s in SENTENCES)


def test_the_fused_source_is_one_spout_and_sends_only_the_words():
    b = Builder()
    program(b, ["a the b", "c"])
    p = HostPipeline(plan_of(b, True), "generator-1__flatmap-1__map-1__filter-1")
    spout = p.host("generator-1__flatmap-1__map-1__filter-1")
    assert isinstance(spout, SpoutHost) and isinstance(spout.user, comp.GeneratorSpout)
    p.pump(spout_calls=3)
    assert spout.emitter.emitted == 3  # A, B, C: the sentences never left the task
    out = p.host("out")
    assert out.counters.processed == 3


def test_a_raising_operator_in_the_source_drops_its_element_alone_with_one_line(caplog):
    b = Builder()
    program(b, ["a boom b", "boom", "c"])
    p = HostPipeline(plan_of(b, True), "generator-1__flatmap-1__map-1__filter-1")
    with caplog.at_level(logging.ERROR):
        p.pump(spout_calls=5)
    assert p.host("out").counters.processed == 3  # A, B, C
    lines = [r.getMessage() for r in caplog.records if "raised" in r.getMessage()]
    assert lines == ["streamlet 'map-1' (map): map_function raised ValueError: no boom for element 'boom'; "
                     "dropped (its tuple is not tracked)"] * 2
    host = p.host("generator-1__flatmap-1__map-1__filter-1")
    metrics = {name: m.get_value_and_reset() for name, (m, _) in host.context.registered_metrics.items()
               if name.startswith(comp.METRIC_PREFIX)}
    assert metrics == {
        "streamlet-op/flatmap-1/in": 3, "streamlet-op/flatmap-1/out": 5, "streamlet-op/flatmap-1/failed": 0,
        "streamlet-op/map-1/in": 5, "streamlet-op/map-1/out": 3, "streamlet-op/map-1/failed": 2,
        "streamlet-op/filter-1/in": 3, "streamlet-op/filter-1/out": 3, "streamlet-op/filter-1/failed": 0,
    }


class Endless(Generator):
    """As many elements as asked for; counts the calls. ``cost_s`` is what each get() takes
    on the test's clock."""

    def __init__(self, clock: ManualClock | None = None, cost_s: float = 0.0) -> None:
        self.clock, self.cost_s = clock, cost_s

    def setup(self, context: Any) -> None:
        self.calls = 0

    def get(self) -> Any:
        self.calls += 1
        if self.clock is not None:
            self.clock.advance(self.cost_s)
        return "a b"


def spout_host(gen: Generator, fusion: bool, clock: ManualClock, tap: Any = None) -> SpoutHost:
    b = Builder()
    b.new_source(gen).flat_map(str.split).repartition(1).set_name("out")
    plan = plan_of(b, fusion)
    [task] = [t.task_id for t in plan.packing.tasks if t.component.startswith("generator-1")]
    frames: list[bytes] = []
    host = make_host(plan, task, frames.extend, HostOptions(rng=random.Random(1), clock=clock, tap=tap))
    assert isinstance(host, SpoutHost)
    host.initialize()
    host.user.clock = clock
    host.start()
    return host


def test_a_fast_source_batch_is_bounded_so_backpressure_stops_it_within_one_batch():
    clock = ManualClock()
    host = spout_host(Endless(), True, clock)
    limit = comp.SourceSpout.limits.max_elements
    per_call = [host.next_tuples(1) for _ in range(14)]
    # the batch doubles on the clock that does not move, then stays at the limit: two words
    # per element, never more than the limit's worth in one next_tuple
    assert per_call[:4] == [2, 4, 8, 16] and max(per_call) == 2 * limit and per_call[-1] == 2 * limit
    gen = host.user._generator
    assert gen.calls == sum(per_call) // 2  # no get() beyond what was emitted
    # the runner's backpressure is "no next_tuple while frames are held": nothing is asked then
    calls = gen.calls
    host.flush()
    assert gen.calls == calls


def test_a_slow_source_keeps_each_next_tuple_near_the_target_time():
    clock = ManualClock()
    host = spout_host(Endless(cost_s=0.003), True, clock)  # each get() takes over the 2 ms target
    gen = host.user._generator
    gen.clock = clock  # the task's copy of the generator (it was cloudpickled): on the test's clock
    start = clock()
    emitted = host.next_tuples(64, budget_s=0.010)
    # one element per next_tuple, and the host's budget ends the round: no batch of slow calls
    assert host.user._sizer.size == 1 and emitted == 2 * gen.calls and gen.calls == 4
    assert clock() - start == pytest.approx(0.012)


def test_without_fusion_the_source_still_emits_a_batch_per_call():
    clock = ManualClock()
    host = spout_host(Endless(), False, clock)
    assert host.component == "generator-1"
    assert [host.next_tuples(1) for _ in range(4)] == [1, 2, 4, 8]


def test_a_tap_sees_every_tuple_of_a_batch():
    clock = ManualClock()
    seen: list[Any] = []
    host = spout_host(Endless(), True, clock, tap=lambda stream, values: seen.append((stream, tuple(values))))
    n = sum(host.next_tuples(1) for _ in range(3))
    assert n == 14 and seen == [(comp.OUTPUT_STREAM, (w,)) for w in "ab" * 7]


def test_a_batch_goes_out_in_one_emit_one_many_call_as_bare_values():
    clock = ManualClock()
    host = spout_host(Endless(), True, clock)
    # the host binds its emitter's bare batch emit at initialize (nothing needs to see each emit)
    assert host.user.heron_emit_one_many == host.emitter.emit_one_many
    calls: list[tuple[list[Any], str]] = []
    one_many = host.user.heron_emit_one_many

    def recording(values: Any, stream: str) -> None:
        calls.append((list(values), stream))
        one_many(values, stream)

    host.user.heron_emit_one_many = recording  # before the first next_tuple, which picks the path
    assert [host.next_tuples(1) for _ in range(3)] == [2, 4, 8]  # counted by the emitter
    assert calls == [(list("ab"), comp.OUTPUT_STREAM), (list("ab" * 2), comp.OUTPUT_STREAM),
                     (list("ab" * 4), comp.OUTPUT_STREAM)]
    # on the wire as one run of bare values per task (serialization.ONE), in emit order
    pending = host.emitter.pending
    assert [(r[0], r[2]) for rows in pending.values() for r in rows] == [(comp.OUTPUT_STREAM, ONE)]
    assert host.emitter.pending_rows() == {t: [(comp.OUTPUT_STREAM, (w,)) for w in "ab" * 7] for t in pending}


def test_without_the_bare_batch_emit_each_element_is_emitted_on_its_own_as_a_one_value_tuple():
    clock = ManualClock()
    host = spout_host(Endless(), True, clock)
    got: list[Any] = []
    host.user.heron_emit_one_many = None
    host.user.emit = lambda values, stream: got.append((list(values), stream))
    host.next_tuples(1)
    assert got == [(["a"], comp.OUTPUT_STREAM), (["b"], comp.OUTPUT_STREAM)] and host.emitter.emitted == 0


def test_the_hosts_heron_emit_one_many_is_used_when_bound():
    clock = ManualClock()
    host = spout_host(Endless(), True, clock)
    got: list[Any] = []
    host.user.heron_emit_one_many = lambda values, stream: got.append((list(values), stream))
    host.next_tuples(1)
    assert got == [(["a", "b"], comp.OUTPUT_STREAM)] and host.emitter.emitted == 0


class Pausing(Generator):
    """Elements with None between them: "nothing right now", then more."""

    def setup(self, context: Any) -> None:
        self.left: list[Any] = ["a", None, "b c", None, None, "d"]

    def get(self) -> Any:
        return self.left.pop(0) if self.left else None


def test_none_pauses_the_source_for_the_call_as_before_and_it_goes_on_at_the_next():
    host = spout_host(Pausing(), True, ManualClock())
    # a batch of 1: a; of 2: None first, nothing; "b c" then None: its two words; None first,
    # nothing; d then None; nothing more. A None ends the call's batch and is not emitted
    assert [host.next_tuples(1) for _ in range(6)] == [1, 0, 2, 0, 1, 0]
    words = [v[0] for rows in host.emitter.pending_rows().values() for _stream, v in rows]
    assert words == ["a", "b", "c", "d"]
