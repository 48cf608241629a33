"""Streamlet fusion (graph.fuse) and per-batch operators (chain.py, ChainBolt, BoltHost's
heron_process_batch): which streamlets share a task, what the fused component is called,
that a fused run gives what the unfused one gives, and that acks and fails stay per source
tuple when an operator raises."""

from __future__ import annotations

import logging
from collections import Counter

import pytest

from heron_py.api.component.component_spec import GlobalStreamId
from heron_py.api.stream import Grouping
from heron_py.api.streamlet import chain, functions
from heron_py.api.streamlet import components as comp
from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.streamlet.runner import build_topology
from heron_py.api.topology import TopologyBuilder
from heron_py.planner.model import GroupingKind, PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.testing import run_in_process
from tests.fakes import HostPipeline, Items

LOG = logging.getLogger("test")



def config(fusion):
    c = Config()
    c.set_fusion(fusion)
    return c


def shape(topo):
    return [(c.name, c.par, [(i.component, i.grouping.kind) for i in c.inputs]) for c in topo.components]


SENTENCES = ["the cat sat", "on the mat", "a cat a hat", "", "the end"]


def test_a_chain_between_repartitions_compiles_to_one_bolt_named_after_its_operators():
    b = Builder()
    b.new_source(Items(SENTENCES)).flat_map(str.split).map(lambda w: (w, 1)).filter(lambda p: p[0] != "a") \
        .repartition(2, lambda p, n: len(p[0]) % n).map(lambda p: p[0]).consume(print)
    topo = build_topology("f", config(True), b)
    # the source's spout runs the flat_map, map and filter (same parallelism, only reader)
    assert shape(topo) == [
        ("generator-1__flatmap-1__map-1__filter-1", 1, []),
        ("repartition-1__map-2__consume-1", 2, [("generator-1__flatmap-1__map-1__filter-1", GroupingKind.CUSTOM)]),
    ]
    fused = topo.component("generator-1__flatmap-1__map-1__filter-1")
    assert fused.outputs[0].name == comp.OUTPUT_STREAM
    assert fused.config[comp.FUSED_KINDS] == "flatmap,map,filter"
    assert fused.config[comp.FUSED_NAMES] == "flatmap-1,map-1,filter-1"
    assert topo.component("repartition-1__map-2__consume-1").outputs == ()


def test_without_fusion_every_streamlet_keeps_its_component():
    b = Builder()
    b.new_source(Items(SENTENCES)).flat_map(str.split).map(lambda w: w).consume(print)
    assert [c.name for c in build_topology("f", config(False), b).components] == \
        ["generator-1", "flatmap-1", "map-1", "consume-1"]


def test_clone_union_parallelism_and_keyed_steps_are_not_fused_across():
    b = Builder()
    src = b.new_source(Items(SENTENCES))
    words = src.flat_map(str.split)
    left, right = words.clone(2)
    left.map(str.upper).union(right.map(str.lower)).map(len).set_num_partitions(1).consume(print)
    words2 = src.map(str.strip)  # the source has two readers: neither fuses into the spout
    words2.map(str.title).set_num_partitions(3).count_by_key(lambda w: w).log()
    topo = build_topology("f", config(True), b)
    S, C = GroupingKind.SHUFFLE, GroupingKind.CUSTOM
    assert shape(topo) == [
        ("generator-1", 1, []),
        # the source has two readers, the flat_map two (the clones): each keeps its task
        ("flatmap-1", 1, [("generator-1", S)]),
        ("repartition-1__map-1", 1, [("flatmap-1", S)]),
        ("repartition-2__map-2", 1, [("flatmap-1", S)]),
        ("map-3", 1, [("generator-1", S)]),
        ("map-4", 3, [("map-3", S)]),  # par 3 after par 1: the shuffle spreads, kept
        ("countbykey-1", 3, [("map-4", C)]),
        ("log-1", 3, [("countbykey-1", S)]),  # behind a stateful operator: never fused
        # a union reads two streamlets: nothing fuses into it, what follows fuses behind it
        ("union-1__map-5__consume-1", 1, [("repartition-1__map-1", S), ("repartition-2__map-2", S)]),
    ]


def test_set_fusion_refuses_a_non_bool_with_one_line():
    with pytest.raises(StreamletError) as e:
        Config().set_fusion("yes")
    assert str(e.value) == "Config.set_fusion: expected True or False, found 'yes'"


def build(fusion, make):
    b = Builder()
    make(b.new_source(Items(SENTENCES * 3))).repartition(1).set_name("out")
    return run_in_process(build_topology("f", config(fusion), b), capture=["out"])


def splits_then(s):
    return s.flat_map(str.split)


PROGRAMS = {
    "flat_map": splits_then,
    "flat_map,map,filter": lambda s: splits_then(s).map(str.upper).filter(lambda w: w != "THE"),
    "filter,flat_map,map": lambda s: s.filter(lambda x: "cat" in x).flat_map(str.split).map(len),
    "map,flat_map(chars)": lambda s: s.map(lambda x: x[:3]).flat_map(lambda x: x),
    "flat_map(non-iterable)": lambda s: s.flat_map(len).map(lambda n: n * 2),
    "repartition inside": lambda s: splits_then(s).repartition(3, lambda w, n: len(w) % n)
    .map(lambda w: w + "!").filter(lambda w: len(w) > 2),
    "clone and union": lambda s: (lambda a, c: a.map(str.upper).union(c.filter(bool)))(*splits_then(s).clone(2)),
    "count_by_key after a chain": lambda s: splits_then(s).map(str.lower).count_by_key(lambda w: w, emit="final"),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_fused_run_outputs_what_the_unfused_run_outputs(name):
    fused = Counter(map(repr, (v[0] for v in build(True, PROGRAMS[name]).values("out"))))
    plain = Counter(map(repr, (v[0] for v in build(False, PROGRAMS[name]).values("out"))))
    assert plain and fused == plain


# --- the chain itself, pure ---------------------------------------------------------------------


def test_a_raising_function_drops_its_element_alone_and_each_function_runs_once_per_element():
    calls = []

    def half(x):
        calls.append(x)
        if x % 3 == 0:
            raise ValueError(f"no {x}")
        return x // 2

    c = chain.Chain([chain.Op(chain.FILTER, "f", lambda x: x != 4), chain.Op(chain.MAP, "m", half),
                     chain.Op(chain.FLATMAP, "fm", lambda x: [x, x])])
    errors = []
    out = c.run(list(range(10)), lambda i, x, e: errors.append((i, x, str(e))))
    assert out == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]  # 1, 2, 5, 7, 8, 9->x: 0,1,2,3,4 (3, 6, 9 and 0 dropped)
    assert errors == [(1, 0, "no 0"), (1, 3, "no 3"), (1, 6, "no 6"), (1, 9, "no 9")]
    assert calls == [0, 1, 2, 3, 5, 6, 7, 8, 9]  # 4 filtered; no element twice
    assert (c.counts_in, c.counts_out) == ([10, 9, 5], [9, 5, 10])


def test_a_raising_filter_keeps_the_others_in_order():
    c = chain.Chain([chain.Op(chain.FILTER, "f", lambda x: 10 // x > 2)])
    errors = []
    assert c.run([1, 0, 2, 5, 3], lambda i, x, e: errors.append(x)) == [1, 2, 3]
    assert errors == [0]


def test_a_chain_refuses_a_sink_before_the_end_with_one_line():
    with pytest.raises(ValueError) as e:
        chain.Chain([chain.Op(chain.CONSUME, "consume-1", print), chain.Op(chain.MAP, "map-1", str)])
    assert str(e.value) == "streamlet chain operator 0 ('consume-1'): a consume ends a chain, found it before 1 more"


# --- acks and fails per source tuple --------------------------------------------------------------


def boom_upper(word):
    if word == "boom":
        raise ValueError("no boom")
    return word.upper()


class Lines(comp.StreamletSpout):
    LINES = ["a b", "c boom d", "e"]

    def initialize(self, config, context):
        self.i, self.acked, self.failed = 0, [], []

    def next_tuple(self):
        if self.i < len(self.LINES):
            self.emit([self.LINES[self.i]], tup_id=self.i, stream=comp.OUTPUT_STREAM)
            self.i += 1

    def ack(self, tup_id):
        self.acked.append(tup_id)

    def fail(self, tup_id):
        self.failed.append(tup_id)


class Collect(comp.StreamletBolt):
    outputs = []

    def initialize(self, config, context):
        self.got = []

    def process(self, tup):
        self.got.append(tup.values[0])
        self.ack(tup)


def fused_plan(mode):
    cfg = {comp.FUSED_KINDS: "flatmap,map", comp.FUSED_NAMES: "flatmap-1,map-1",
           f"{comp.FUSED_FUNCTION_PREFIX}0": functions.pack("t", str.split),
           f"{comp.FUSED_FUNCTION_PREFIX}1": functions.pack("t", boom_upper)}
    b = TopologyBuilder("k")
    b.add_spout("lines", Lines, par=1)
    b.add_bolt("flatmap-1__map-1", comp.FusedBolt, par=1, config=cfg,
               inputs={GlobalStreamId("lines", comp.OUTPUT_STREAM): Grouping.SHUFFLE})
    b.add_bolt("sink", Collect, par=1,
               inputs={GlobalStreamId("flatmap-1__map-1", comp.OUTPUT_STREAM): Grouping.SHUFFLE})
    b.set_config({"topology.reliability.mode": mode, "topology.message.timeout.secs": 30})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)



def test_at_least_once_a_raising_operator_fails_only_its_source_tuple(caplog):
    p = HostPipeline(fused_plan("ATLEAST_ONCE"), "lines")
    with caplog.at_level(logging.ERROR):
        p.pump(spout_calls=10)
    [spout], [sink] = p.users("lines"), p.users("sink")
    assert sorted(spout.acked) == [0, 2] and spout.failed == [1]
    # nothing of the failed sentence goes out: its outputs are emitted only once the whole
    # chain ran on it without an error (the replay then emits them once)
    assert sorted(sink.got) == ["A", "B", "E"]
    lines = [r.getMessage() for r in caplog.records if "raised" in r.getMessage()]
    assert lines == ["streamlet 'map-1' (map): map_function raised ValueError: no boom for element 'boom'; "
                     "failing its source tuple"]
    assert p.host("flatmap-1__map-1").metrics.failed == 1


def test_at_most_once_the_batch_goes_through_in_one_call_and_a_raising_element_is_counted(caplog):
    p = HostPipeline(fused_plan("ATMOST_ONCE"), "lines")
    host = p.host("flatmap-1__map-1")
    assert host._batch is not None
    with caplog.at_level(logging.ERROR):
        p.pump(spout_calls=10)
    [sink] = p.users("sink")
    assert sorted(sink.got) == ["A", "B", "C", "D", "E"]
    lines = [r.getMessage() for r in caplog.records if "raised" in r.getMessage()]
    assert lines == ["streamlet 'map-1' (map): map_function raised ValueError: no boom for element 'boom'; "
                     "dropped (its tuple is not tracked)"]
    assert (host.metrics.acked, host.metrics.failed, host.counters.processed) == (2, 1, 3)
    user = host.user
    metrics = {name: m.get_value_and_reset() for name, (m, _) in host.context.registered_metrics.items()
               if name.startswith(comp.METRIC_PREFIX)}
    assert metrics == {"streamlet-op/flatmap-1/in": 3, "streamlet-op/flatmap-1/out": 6,
                       "streamlet-op/flatmap-1/failed": 0,
                       "streamlet-op/map-1/in": 6, "streamlet-op/map-1/out": 5, "streamlet-op/map-1/failed": 1}
    assert user.chain.counts_out == [6, 5]
