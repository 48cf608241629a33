"""heronpy's Streamlet API (heron_py/api/streamlet): each operator run in process through the
real plan, groupings and hosts; what the graph compiles to; user functions through
cloudpickle; and the one error each mistake gives."""

from __future__ import annotations

from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.context import Context
from heron_py.api.streamlet.generator import Generator
from heron_py.api.streamlet.runner import build_topology
from heron_py.api.streamlet.sink import Sink
from heron_py.api.streamlet.transformoperator import TransformOperator
from heron_py.api.streamlet.window import KeyedWindow, Window
from heron_py.api.streamlet.windowconfig import WindowConfig
from heron_py.testing import run_in_process
from tests.fakes import Items


def run(builder, capture, ticks=0, **kw):
    """Each streamlet its own component (fusion off), so a capture is one operator's input;
    test_fusion_equivalence.py runs these shapes fused, as they run by default."""
    config = Config()
    config.set_fusion(False)
    return run_in_process(build_topology("t", config, builder), capture=capture, ticks=ticks, **kw)


def elements(result, component):
    return [v[0] for v in result.values(component)]


def test_map_flat_map_filter_in_order():
    b = Builder()
    b.new_source(Items(["a b", "c d e"])).flat_map(lambda line: line.split()) \
        .map(lambda w: w.upper()).filter(lambda w: w != "C").log()
    r = run(b, ["log-1"])
    assert elements(r, "log-1") == ["A", "B", "D", "E"]


def test_flat_map_of_a_non_iterable_emits_the_value_itself():
    b = Builder()
    b.new_source(Items([1, 2])).flat_map(lambda x: x * 10).log()
    assert elements(run(b, ["log-1"]), "log-1") == [10, 20]


def test_closures_travel_through_cloudpickle():
    offset = 100
    table = {"a": 1, "b": 2}

    def lookup(w):
        return table[w] + offset

    b = Builder()
    b.new_source(Items(["a", "b"])).map(lookup).map(lambda x: x * 2).log()
    assert elements(run(b, ["log-1"]), "log-1") == [202, 204]


def test_supplier_function_source():
    counter = iter(range(3))
    b = Builder()
    b.new_source(lambda: next(counter, None)).log()
    assert elements(run(b, ["log-1"], max_spout_calls=5), "log-1")[:4] == [0, 1, 2, None]


def test_union_gets_both_parents():
    b = Builder()
    left = b.new_source(Items([1, 2]))
    right = b.new_source(Items([3]))
    left.union(right).log()
    assert sorted(elements(run(b, ["log-1"]), "log-1")) == [1, 2, 3]


def test_repartition_with_a_function_chooses_partitions():
    b = Builder()
    b.new_source(Items(range(6))).repartition(3, lambda x, n: x % n).set_name("parts").log()
    r = run(b, ["parts"])
    by_task: dict[int, list[int]] = {}
    for rec in r.received["parts"]:
        by_task.setdefault(rec.task, []).append(rec.values[0])
    assert sorted(by_task.values()) == [[0, 3], [1, 4], [2, 5]]


def test_repartition_to_several_partitions_at_once():
    b = Builder()
    b.new_source(Items(["x"])).repartition(3, lambda x, n: [0, 2]).set_name("parts").log()
    assert len(run(b, ["parts"]).received["parts"]) == 2


def test_clone_gives_every_element_to_each_clone():
    b = Builder()
    one, two = b.new_source(Items([1, 2])).clone(2)
    one.set_name("one").log()
    two.set_name("two").map(lambda x: -x).log()
    r = run(b, ["one", "two", "log-1", "log-2"])
    assert elements(r, "one") == [1, 2] and elements(r, "two") == [1, 2]
    assert sorted(elements(r, "log-1") + elements(r, "log-2")) == [-2, -1, 1, 2]


class Doubler(TransformOperator):
    def setup(self, context):
        self.context = context

    def transform(self, tup):
        self.context.emit(tup.values[0])
        self.context.emit(tup.values[0])


def test_transform_emits_through_its_context():
    b = Builder()
    b.new_source(Items(["a", "b"])).transform(Doubler()).log()
    assert elements(run(b, ["log-1"]), "log-1") == ["a", "a", "b", "b"]


seen_by_consume: list[object] = []


def remember(element):
    # module level: cloudpickle keeps it a reference, so the in-process task appends here
    seen_by_consume.append(element)


def test_consume_calls_the_function():
    seen_by_consume.clear()
    b = Builder()
    b.new_source(Items([1, 2])).consume(remember)
    run(b, [])
    assert seen_by_consume == [1, 2]


class ListSink(Sink):
    got: list[object] = []
    contexts: list[tuple[int, int]] = []

    def setup(self, context):
        ListSink.contexts.append((context.get_partition_index(), context.get_num_partitions()))

    def put(self, element):
        ListSink.got.append(element)


class ClosingSink(ListSink):
    cleaned = 0

    def cleanup(self):
        ClosingSink.cleaned += 1


def test_the_sink_is_cleaned_up_when_its_task_closes():
    from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
    from heron_py.planner.packing import round_robin
    from heron_py.runtime.host import make_host

    ClosingSink.cleaned = 0
    b = Builder()
    b.new_source(Items([1])).to_sink(ClosingSink())
    topo = build_topology("t", Config(), b)
    packing = round_robin(topo, 1)
    plan = PhysicalPlan(topo, packing, (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)
    sink = next(t.task_id for t in packing.tasks if t.component.startswith("sink"))
    host = make_host(plan, sink, [].extend)
    host.initialize()
    assert ClosingSink.cleaned == 0
    host.close()
    assert ClosingSink.cleaned == 1


def test_to_sink_sets_up_each_partition_and_puts_every_element():
    ListSink.got, ListSink.contexts = [], []
    b = Builder()
    src = b.new_source(Items([1, 2, 3]))
    src.to_sink(ListSink())
    b2 = Builder()
    b2.new_source(Items([])).set_num_partitions(2).to_sink(ListSink())
    run(b, [])
    assert ListSink.got == [1, 2, 3]
    run(b2, [])
    assert sorted(ListSink.contexts) == [(0, 1), (0, 2), (1, 2)]


def test_log_writes_each_element_at_info(caplog):
    b = Builder()
    b.new_source(Items([("k", 1)])).log()
    with caplog.at_level("INFO"):
        run(b, [])
    assert "('k', 1)" in caplog.messages


def test_reduce_by_key_and_window_sums_per_key():
    b = Builder()
    b.new_source(Items(["a b", "a"])).flat_map(str.split).map(lambda w: (w, 1)) \
        .reduce_by_key_and_window(WindowConfig.create_sliding_window(10, 2), lambda x, y: x + y).log()
    out = elements(run(b, ["log-1"], ticks=1), "log-1")
    assert sorted((kw.get_key(), n) for kw, n in out) == [("a", 2), ("b", 1)]
    kw = out[0][0]
    assert isinstance(kw, KeyedWindow) and kw.get_window().get_end_time() - kw.get_window().get_start_time() == 10
    assert repr(kw).startswith("KeyedWindow {key: a, window: Window {start_time: ")


def test_reduce_by_key_sends_one_key_to_one_partition():
    b = Builder()
    b.new_source(Items([(k, 1) for k in "abcabcab"])).reduce_by_key_and_window(
        WindowConfig.create_tumbling_window(5), lambda x, y: x + y).set_num_partitions(3).set_name("red").log()
    r = run(b, ["red", "log-1"], ticks=1)
    tasks_of_key: dict[str, set[int]] = {}
    for rec in r.received["red"]:
        tasks_of_key.setdefault(rec.values[0][0], set()).add(rec.task)
    assert all(len(t) == 1 for t in tasks_of_key.values())
    assert sorted((kw.get_key(), n) for kw, n in elements(r, "log-1")) == [("a", 3), ("b", 3), ("c", 2)]


def test_reduce_by_window_folds_every_element_and_skips_empty_windows():
    b = Builder()
    b.new_source(Items([1, 2, 3, 4])).set_num_partitions(1) \
        .reduce_by_window(WindowConfig.create_tumbling_window(3), lambda x, y: x + y).log()
    out = elements(run(b, ["log-1"], ticks=1), "log-1")
    assert len(out) == 1 and out[0][1] == 10 and isinstance(out[0][0], Window)
    b2 = Builder()
    b2.new_source(Items([])).reduce_by_window(WindowConfig.create_tumbling_window(3), lambda x, y: x + y).log()
    assert elements(run(b2, ["log-1"], ticks=1), "log-1") == []


def _join(method):
    b = Builder()
    left = b.new_source(Items([("k1", "a"), ("k1", "b"), ("left-only", "l")]))
    right = b.new_source(Items([("k1", "c"), ("right-only", "r")]))
    getattr(left, method)(right, WindowConfig.create_sliding_window(2, 1), lambda x, y: (x, y)).log()
    return sorted((kw.get_key(), v) for kw, v in elements(run(b, ["log-1"], ticks=1), "log-1"))


def test_joins_pair_values_by_key_per_window():
    inner = [("k1", ("a", "c")), ("k1", ("b", "c"))]
    assert _join("join") == inner
    assert _join("outer_left_join") == sorted([*inner, ("left-only", ("l", None))])
    assert _join("outer_right_join") == sorted([*inner, ("right-only", (None, "r"))])
    assert _join("outer_join") == sorted([*inner, ("left-only", ("l", None)), ("right-only", (None, "r"))])


def test_heronpy_join_example_shape():
    """join_streamlet_topology.py's data: lists of [key, value] join into key1 → 'ac' etc."""
    b = Builder()
    s1 = b.new_source(Items([["key1", "a"], ["key1", "b"]]))
    s2 = b.new_source(Items([["key1", "c"], ["key1", "d"]]))
    s1.join(s2, WindowConfig.create_sliding_window(2, 1), lambda x, y: x + y).log()
    out = elements(run(b, ["log-1"], ticks=1), "log-1")
    assert sorted(v for _, v in out) == ["ac", "ad", "bc", "bd"]


class PartitionReporter(Generator):
    def setup(self, context: Context):
        self.out = [(context.get_partition_index(), context.get_num_partitions(), context.get_stream_name())]

    def get(self):
        return self.out.pop() if self.out else None


def test_generator_context_knows_its_partition():
    b = Builder()
    b.new_source(PartitionReporter()).set_num_partitions(2).log()
    assert sorted(elements(run(b, ["log-1"]), "log-1")) == [(0, 2, "output"), (1, 2, "output")]
