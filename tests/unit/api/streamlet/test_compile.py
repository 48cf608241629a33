"""What a Streamlet graph compiles to (components, groupings, parallelism, config), heronpy's
module paths, Config's keys, and the one error each mistake gives (asserted verbatim)."""

from __future__ import annotations

import datetime
import importlib
import subprocess
import sys
import textwrap

import pytest

from heron_py.api import api_constants, submit_hook
from heron_py.api.connectors.mock.arraylooper import ArrayLooper
from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.streamlet.generator import Generator
from heron_py.api.streamlet.resources import Resources
from heron_py.api.streamlet.runner import Runner, build_topology
from heron_py.api.streamlet.windowconfig import WindowConfig
from heron_py.common.config_codec import restore_config
from heron_py.planner.errors import TopologyError
from heron_py.planner.model import GroupingKind

HERONPY_STREAMLET_MODULES = [
    "builder", "runner", "config", "windowconfig", "streamlet", "keyedwindow", "window",
    "transformoperator", "context", "generator", "resources", "sink",
]


def word_count() -> Builder:
    b = Builder()
    b.new_source(ArrayLooper(["Mary Had a little lamb", "I Love You"])) \
        .flat_map(lambda line: line.split()) \
        .map(lambda word: (word, 1)) \
        .reduce_by_key_and_window(WindowConfig.create_sliding_window(10, 2), lambda x, y: x + y) \
        .log()
    return b


def shape_of(topo):
    return [(c.name, c.kind.value, c.par, [(i.component, i.stream, i.grouping.kind) for i in c.inputs])
            for c in topo.components]


def test_word_count_compiles_to_one_component_per_task_by_default():
    # the flat_map and map run in the source's spout; a windowed operator is never fused
    assert shape_of(build_topology("wc", Config(), word_count())) == [
        ("generator-1__flatmap-1__map-1", "spout", 1, []),
        ("reducebykeyandwindow-1", "bolt", 1, [("generator-1__flatmap-1__map-1", "output", GroupingKind.CUSTOM)]),
        ("log-1", "bolt", 1, [("reducebykeyandwindow-1", "output", GroupingKind.SHUFFLE)]),
    ]


def test_word_count_without_fusion_compiles_to_heronpys_components():
    config = Config()
    config.set_fusion(False)
    topo = build_topology("wc", config, word_count())
    shape = shape_of(topo)
    assert shape == [
        ("generator-1", "spout", 1, []),
        ("flatmap-1", "bolt", 1, [("generator-1", "output", GroupingKind.SHUFFLE)]),
        ("map-1", "bolt", 1, [("flatmap-1", "output", GroupingKind.SHUFFLE)]),
        ("reducebykeyandwindow-1", "bolt", 1, [("map-1", "output", GroupingKind.CUSTOM)]),
        ("log-1", "bolt", 1, [("reducebykeyandwindow-1", "output", GroupingKind.SHUFFLE)]),
    ]
    assert [s.fields for s in topo.component("map-1").outputs] == [("_output_",)]
    red = restore_config(topo.component("reducebykeyandwindow-1").config)
    assert (red["slidingwindowbolt_duration_secs"], red["slidingwindowbolt_slideinterval_secs"]) == (10, 2)
    assert isinstance(red["function"], bytes)  # cloudpickled


def test_partitions_names_and_operator_groupings():
    b = Builder()
    src = b.new_source(lambda: 1).set_num_partitions(2).set_name("numbers")
    m = src.map(lambda x: x)
    other = b.new_source(lambda: ("k", 1))
    m.union(other).repartition(4).set_name("spread").reduce_by_window(
        WindowConfig.create_tumbling_window(datetime.timedelta(seconds=3)), lambda x, y: x).log()
    src.map(lambda x: (x, x)).join(other, WindowConfig.create_tumbling_window(2), lambda x, y: x).log()
    topo = build_topology("p", Config(), b)
    pars = {c.name: c.par for c in topo.components}
    assert pars == {"numbers": 2, "supplier-1": 1, "map-1": 2, "map-2": 2, "union-1": 2, "spread": 4,
                    "reducebywindow-1": 1, "join-1": 2, "log-1": 1, "log-2": 2}
    kinds = {c.name: [i.grouping.kind for i in c.inputs] for c in topo.components}
    assert kinds["reducebywindow-1"] == [GroupingKind.LOWEST]
    assert kinds["join-1"] == [GroupingKind.CUSTOM, GroupingKind.CUSTOM]
    assert restore_config(topo.component("join-1").config)["streamlet.parents"] == "map-2,supplier-1"


def test_runner_submits_through_the_submit_hook():
    got = []
    previous = submit_hook.set_submit_handler(got.append)
    try:
        Runner().run("wc", Config(), word_count())
    finally:
        submit_hook.set_submit_handler(previous)
    assert [t.name for t in got] == ["wc"]


def test_config_knobs_map_to_heronpys_keys():
    c = Config({"user.key": "v"})
    c.set_delivery_semantics(Config.ATLEAST_ONCE)
    c.set_num_containers(3)
    c.set_container_resources(Resources().set_cpu(2).set_ram_in_mb(512))
    c.set_user_config("other", 7)
    topo = build_topology("c", c, word_count())
    cfg = restore_config(topo.config)
    assert cfg == {"user.key": "v", "topology.reliability.mode": "ATLEAST_ONCE", "topology.stmgrs": 3,
                   "topology.container.cpu": 2.0, "topology.container.ram": 512 * 1024 * 1024, "other": 7}
    assert Config.ATMOST_ONCE == 1 and Config.EFFECTIVELY_ONCE == 3  # heronpy's ints still compare equal


def test_effectively_once_reaches_the_topology_config():
    from heron_py.common.config import ReliabilityConfig, check_topology_config, effectively_once

    c = Config()
    c.set_delivery_semantics(Config.EFFECTIVELY_ONCE)
    topo = build_topology("eo", c, word_count())
    assert topo.config[api_constants.TOPOLOGY_RELIABILITY_MODE] == "EFFECTIVELY_ONCE"
    conf = restore_config(topo.config)
    check_topology_config(conf, {})
    assert effectively_once(conf) and not ReliabilityConfig.from_config(conf).acking


@pytest.mark.parametrize("name", HERONPY_STREAMLET_MODULES)
def test_heronpy_streamlet_names_are_the_heron_py_objects(name):
    alias = importlib.import_module(f"heronpy.streamlet.{name}")
    public = [n for n in dir(alias) if not n.startswith("_") and n != "annotations"]
    assert public
    for n in public:
        real = getattr(alias, n)
        assert real.__module__.startswith("heron_py.api.streamlet."), f"heronpy.streamlet.{name}.{n}"


def test_heronpy_imports_of_the_examples_work_in_a_fresh_interpreter():
    code = textwrap.dedent("""
        from heronpy.streamlet.builder import Builder
        from heronpy.streamlet.runner import Runner
        from heronpy.streamlet.config import Config
        from heronpy.streamlet.windowconfig import WindowConfig
        from heronpy.connectors.mock.arraylooper import ArrayLooper
        from heronpy.connectors.textfiles.textfilesgenerator import TextFileGenerator
        from heronpy.connectors.pulsar.pulsarstreamlet import PulsarStreamlet
        import heron_py.api.connectors.mock.arraylooper as real
        assert ArrayLooper is real.ArrayLooper
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "ok\n"


def _error(fn) -> str:
    with pytest.raises(StreamletError) as e:
        fn()
    assert isinstance(e.value, TopologyError) and isinstance(e.value, RuntimeError)
    return str(e.value)


def test_bad_operator_arguments_give_one_clear_error():
    b = Builder()
    src = b.new_source(ArrayLooper([1]))
    wc = WindowConfig.create_tumbling_window(1)
    assert _error(lambda: src.map(3)) == \
        "Streamlet.map() on a generator streamlet: map_function must be callable, found 3 (int)"
    assert _error(lambda: src.set_name("nums").filter(lambda a, b: a)) == \
        "Streamlet.filter() on streamlet 'nums': filter_function must take 1 argument, found <lambda>(a, b)"
    assert _error(lambda: src.reduce_by_key_and_window(10, lambda a, b: a)) == (
        "Streamlet.reduce_by_key_and_window() on streamlet 'nums': window_config must be a WindowConfig "
        "(WindowConfig.create_sliding_window(...) or create_tumbling_window(...)), found int")
    assert _error(lambda: src.join([1], wc, lambda a, b: a)) == \
        "Streamlet.join() on streamlet 'nums': expected a Streamlet to join with, found list"
    assert _error(lambda: src.join(src, wc, lambda a, b: a)) == \
        "Streamlet.join() on streamlet 'nums': a streamlet cannot be joined with itself; clone() it first"
    assert _error(lambda: src.repartition(0)) == \
        "Streamlet.repartition() on streamlet 'nums': num_partitions must be an integer >= 1, found 0"
    assert _error(lambda: src.repartition(2, lambda x: 0)) == (
        "Streamlet.repartition() on streamlet 'nums': repartition_function must take 2 arguments, "
        "found <lambda>(x)")
    assert _error(lambda: src.transform(lambda x: x)) == \
        "Streamlet.transform() on streamlet 'nums': expected a TransformOperator, found function"
    assert _error(lambda: b.new_source(3)) == "Builder.new_source: expected a Generator or a function, found 3 (int)"


def test_bad_window_configs():
    assert _error(lambda: WindowConfig.create_tumbling_window(0)) == \
        "WindowConfig: window duration must be at least 1 second, found 0"
    assert _error(lambda: WindowConfig.create_sliding_window(5, datetime.timedelta(milliseconds=1500))) == (
        "WindowConfig: slide interval must be whole seconds (Python windowing has second resolution), "
        "found datetime.timedelta(seconds=1, microseconds=500000)")
    assert _error(lambda: WindowConfig.create_sliding_window(2, 5)) == \
        "WindowConfig: slide interval (5 s) must not be longer than the window duration (2 s)"
    assert _error(lambda: WindowConfig.create_sliding_window("10", 2)) == \
        "WindowConfig: window duration must be an int of seconds or a datetime.timedelta, found '10'"


def test_bad_graphs_and_runner_arguments():
    assert _error(lambda: build_topology("t", Config(), Builder())) == \
        "Builder has no sources: add one with builder.new_source(...) before running it"
    b, other = Builder(), Builder()
    stray = other.new_source(lambda: 1).set_name("stray")
    b.new_source(lambda: 1).union(stray).log()
    assert _error(lambda: build_topology("t", Config(), b)) == (
        "a union streamlet (union) reads streamlet 'stray', which does not come from this Builder's sources; "
        "expected every streamlet of a topology to start at one Builder's new_source()")
    dup = Builder()
    dup.new_source(lambda: 1).set_name("x").map(lambda v: v).set_name("x")
    assert _error(lambda: build_topology("t", Config(), dup)) == \
        "streamlet name 'x' is used by two streamlets; expected unique names (set_name)"
    assert _error(lambda: Runner().run("t", {}, word_count())) == \
        "Runner.run: config must be a heronpy.streamlet.config.Config, found dict"
    assert _error(lambda: Config().set_delivery_semantics(7)) == \
        "Config.set_delivery_semantics: expected Config.ATMOST_ONCE, ATLEAST_ONCE or EFFECTIVELY_ONCE, found 7"


class Locked(Generator):
    def __init__(self):
        import threading
        self.lock = threading.Lock()

    def setup(self, context):
        pass

    def get(self):
        return None


def test_an_object_that_cannot_travel_is_refused_at_build_with_its_streamlet():
    b = Builder()
    b.new_source(Locked()).log()
    msg = _error(lambda: build_topology("t", Config(), b))
    assert msg.startswith("streamlet 'generator-1' (generator): Locked  cannot be serialized to run in other "
                          "processes (TypeError: cannot pickle '_thread.lock' object)")


def test_pulsar_is_refused_with_one_error():
    from heronpy.connectors.pulsar.pulsarspout import PulsarSpout
    from heronpy.connectors.pulsar.pulsarstreamlet import PulsarStreamlet

    msg = _error(lambda: PulsarStreamlet.pulsarStreamlet("pulsar://x:6650", "topic"))
    assert msg.startswith("PulsarStreamlet.pulsarStreamlet: Pulsar connector is not supported by heron-py: ")
    assert msg.endswith("or a Spout, instead")
    assert _error(lambda: PulsarSpout.spec(name="p")).startswith("PulsarSpout: Pulsar connector is not supported")


def test_array_looper_and_text_file_generator(tmp_path):
    from heron_py.api.connectors.textfiles.textfilesgenerator import TextFileGenerator

    assert _error(lambda: ArrayLooper(5)) == "ArrayLooper: expected an iterable of elements (a list), found 5"
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    (tmp_path / "b.txt").write_text("three\n")

    class Ctx:
        def __init__(self, i, n):
            self.i, self.n = i, n

        def get_partition_index(self):
            return self.i

        def get_num_partitions(self):
            return self.n

    lines = []
    for i in range(2):
        g = TextFileGenerator(str(tmp_path / "*.txt"))
        g.setup(Ctx(i, 2))
        lines.append([g.get(), g.get(), g.get()])
    assert lines == [["one\n", "two\n", None], ["three\n", None, None]]
