"""heronpy compatibility: the aliases are the same objects, and heronpy's signatures and
behaviours (spec, emit, inputs formats, outputs, tuples, metrics, context) hold."""

import importlib
import logging
import pickle
import pkgutil
import subprocess
import sys
import textwrap

import pytest

import heronpy
from heron_py.api import submit_hook
from heron_py.api.bolt.base_bolt import BaseBolt
from heron_py.api.bolt.bolt import Bolt
from heron_py.api.component.component_spec import GlobalStreamId, HeronComponentSpec
from heron_py.api.metrics import (
    AssignableMetrics,
    CountMetric,
    MeanReducedMetric,
    MultiCountMetric,
    MultiMeanReducedMetric,
    ReducedMetric,
)
from heron_py.api.spout.base_spout import BaseSpout
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping, Stream
from heron_py.api.task_hook import ITaskHook
from heron_py.api.topology import Topology, TopologyBuilder, defined_topologies
from heron_py.api.topology_context import StreamId, TopologyContext
from heron_py.api.tuple import HeronTuple, Tuple, TupleHelper
from heron_py.planner.errors import TopologyError
from heron_py.planner.model import GroupingKind
from heron_py.planner.packing import round_robin
from tests.fakes import Counter, Splitter, TwoStreams, WordSpout

HERONPY_MODULES = [
    "heronpy.api.api_constants", "heronpy.api.bolt.bolt", "heronpy.api.bolt.base_bolt",
    "heronpy.api.spout.spout", "heronpy.api.spout.base_spout", "heronpy.api.stream", "heronpy.api.topology",
    "heronpy.api.component.component_spec", "heronpy.api.component.base_component",
    "heronpy.api.custom_grouping", "heronpy.api.metrics", "heronpy.api.tuple", "heronpy.api.topology_context",
    "heronpy.api.task_hook",
]


@pytest.mark.parametrize("name", HERONPY_MODULES)
def test_every_heronpy_name_is_the_heron_py_object(name):
    alias = importlib.import_module(name)
    real = importlib.import_module(name.replace("heronpy.", "heron_py.", 1))
    public = [n for n in dir(alias) if not n.startswith("_") and n != "annotations"]
    assert public
    for n in public:
        assert getattr(alias, n) is getattr(real, n), f"{name}.{n}"


def test_heronpy_package_covers_every_api_module():
    def modules(pkg_name):
        pkg = importlib.import_module(pkg_name)
        return {m.name.removeprefix(pkg_name) for m in pkgutil.walk_packages(pkg.__path__, pkg_name + ".")}

    # heronpy.streamlet and heronpy.connectors sit beside heronpy.api, as in heronpy
    extra = {m for m in modules("heron_py.api") - modules("heronpy.api")
             if not m.startswith((".streamlet", ".connectors"))}
    # heron-py's own: the submit hook, Storm's event-time windows, Storm's shell components, the
    # engine's contracts with connectors (typing.Protocols, no user API)
    assert extra == {".submit_hook", ".bolt.event_windows", ".bolt.event_window_bolt", ".shell", ".contracts"}
    assert "compatibility alias" in heronpy.__doc__


def test_unchanged_heronpy_imports_work_in_a_fresh_interpreter():
    code = textwrap.dedent("""
        from heronpy.api.bolt.bolt import Bolt
        from heronpy.api.spout.spout import Spout
        from heronpy.api.stream import Grouping, Stream
        from heronpy.api.topology import Topology, TopologyBuilder
        from heronpy.api.api_constants import TOPOLOGY_RELIABILITY_MODE, TopologyReliabilityMode
        import heron_py.api.bolt.bolt
        assert Bolt is heron_py.api.bolt.bolt.Bolt
        print(TOPOLOGY_RELIABILITY_MODE, TopologyReliabilityMode.ATLEAST_ONCE)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "topology.reliability.mode ATLEAST_ONCE\n"


def test_config_key_strings_are_heronpys():
    from heron_py.api import api_constants as c

    assert (c.TOPOLOGY_MESSAGE_TIMEOUT_SECS, c.TOPOLOGY_TICK_TUPLE_FREQ_SECS, c.TOPOLOGY_MAX_SPOUT_PENDING,
            c.TOPOLOGY_ENVIRONMENT, c.TOPOLOGY_WORKER_CHILDOPTS, c.TOPOLOGY_COMPONENT_PARALLELISM) == (
        "topology.message.timeout.secs", "topology.tick.tuple.freq.secs", "topology.max.spout.pending",
        "topology.environment", "topology.worker.childopts", "topology.component.parallelism")
    assert c.TopologyReliabilityMode.EFFECTIVELY_ONCE == "EFFECTIVELY_ONCE"


class ModGrouping:
    """A custom grouping at module level (so it pickles by reference)."""

    def prepare(self, context, component, stream, target_tasks):
        self.targets = sorted(target_tasks)

    def choose_tasks(self, values):
        return [self.targets[values[0] % len(self.targets)]]


class FakeDelegate:
    def __init__(self):
        self.calls = []
        self.logger = logging.getLogger("fake")

    def emit(self, tup, stream, anchors, direct_task, need_task_ids, tup_id):
        self.calls.append(("emit", tup, stream, anchors, direct_task, need_task_ids, tup_id))
        return [3] if need_task_ids else None

    def ack(self, tup):
        self.calls.append(("ack", tup))

    def fail(self, tup):
        self.calls.append(("fail", tup))

    def log(self, message, level=None):
        self.calls.append(("log", message, level))


def test_spout_and_bolt_forward_to_the_delegate():
    d = FakeDelegate()
    s = WordSpout(d)
    assert s.emit(["a"], tup_id=7, need_task_ids=True) == [3]
    s.emit(["b"], stream="x", direct_task=4)
    b = Splitter(d)
    b.emit(["c"], anchors=["t"])
    b.ack("t")
    b.fail("t")
    b.log("hi", "warn")
    assert d.calls == [
        ("emit", ["a"], "default", None, None, True, 7),
        ("emit", ["b"], "x", None, 4, False, None),
        ("emit", ["c"], "default", ["t"], None, False, None),
        ("ack", "t"), ("fail", "t"), ("log", "hi", "warn"),
    ]
    assert b.logger is d.logger
    other = logging.getLogger("other")
    b.logger = other  # heronpy's logger was a plain attribute
    assert b.logger is other


def test_class_hierarchy_and_defaults_are_heronpys():
    assert issubclass(Bolt, BaseBolt) and issubclass(Spout, BaseSpout)
    d = FakeDelegate()
    with pytest.raises(NotImplementedError):
        Spout(d).next_tuple()
    with pytest.raises(NotImplementedError):
        Bolt(d).process(None)
    sp = Spout(d)
    for m in (sp.activate, sp.deactivate, sp.close):
        m()
    sp.ack(1)
    sp.fail(1)
    tick = TupleHelper.make_tick_tuple()
    assert Bolt.is_tick(tick) and (tick.component, tick.stream) == ("__system", "__tick")
    assert not Bolt.is_tick(HeronTuple("1", "c", "default", 1, [1], 0.0, None))


def test_tuples_as_heronpy():
    assert Tuple._fields == ("id", "component", "stream", "task", "values")
    assert HeronTuple._fields == ("id", "component", "stream", "task", "values", "creation_time", "roots")
    t = HeronTuple("1", "c", "s", 2, [1])  # five fields are enough, as with heronpy's Tuple
    assert repr(t) == "Tuple(id='1', component='c', stream='s', task=2, values=[1], creation_time=0.0, roots=None)"
    assert pickle.loads(pickle.dumps(t)) == t


def test_spec_merges_outputs_without_touching_the_class():
    spec = TwoStreams.spec(name="s", optional_outputs=["extra", Stream(["z"], name="more")])
    assert spec.get_out_streamids() == {"evens", "odds", "default", "more"}
    assert len(TwoStreams.outputs) == 2
    assert spec["odds"] == GlobalStreamId("s", "odds")
    assert str(spec["odds"]) == "s:odds"
    t = TopologyBuilder("t")
    t.add_spec(spec)
    t.add_bolt("c", Counter, par=1, inputs={spec["more"]: Grouping.fields("z")})
    assert {s.name: s.fields for s in t.build().component("s").outputs} == {
        "evens": ("n",), "odds": ("n", "label"), "default": ("extra",), "more": ("z",)}


def test_heronpy_positional_spec_signature():
    spec = HeronComponentSpec("w", WordSpout, True, 2, None, ["word"], {"k": 1})
    assert (spec.outputs, spec.custom_config, spec.parallelism) == (["word"], {"k": 1}, 2)


def test_groupings_compare_as_in_heronpy():
    assert Grouping.fields(["a", "b"]) == Grouping.fields("a", "b")
    assert Grouping.fields("a").kind is GroupingKind.FIELDS
    assert Grouping.GLOBAL == Grouping.LOWEST
    assert Grouping.is_grouping_sane(Grouping.ALL) and not Grouping.is_grouping_sane(3)
    with pytest.raises(ValueError):
        Grouping.fields()
    with pytest.raises(TypeError):
        Grouping.fields(1)
    with pytest.raises(NotImplementedError):
        Grouping.custom_object("java.Cls", [])
    g = Grouping.custom("tests.unit.api.test_heronpy_compat.ModGrouping")
    assert g.kind is GroupingKind.CUSTOM and type(pickle.loads(g.custom.data)).__name__ == "ModGrouping"
    assert Grouping.custom_serialized(g.custom.data) == g
    with pytest.raises(TopologyError) as e:
        Grouping.custom("tests.fakes.Nope")  # a module without it
    assert str(e.value) == ("custom grouping 'tests.fakes.Nope' cannot be imported (module "
                            "'tests.fakes' has no attribute 'Nope'); expected 'module.Class' naming "
                            "an ICustomGrouping class at module level")


def test_stream_arguments_are_checked():
    with pytest.raises(TypeError) as e:
        Stream(["a"], name="s", direct="yes")
    assert str(e.value) == "Stream 's': direct must be True or False, found 'yes'"
    with pytest.raises(TypeError) as e:
        Stream({"a"})
    assert str(e.value) == "Stream 'default': fields must be a list or tuple of str, found {'a'}"
    assert Stream("word").fields == ["word"]


def test_metrics_as_heronpy():
    c = CountMetric()
    c.incr()
    c.incr(to_add=4)
    assert (c.get_value_and_reset(), c.get_value_and_reset()) == (5, 0)
    m = MultiCountMetric()
    m.add_key("a")
    m.incr("b", 2)
    assert m.get_value_and_reset() == {"a": 0, "b": 2}
    r = MeanReducedMetric()
    assert isinstance(r, ReducedMetric)
    r.update(1)
    r.update("2")
    assert (r.get_value_and_reset(), r.get_value_and_reset()) == (1.5, None)
    mm = MultiMeanReducedMetric()
    mm.update("x", 4)
    assert mm.get_value_and_reset() == {"x": 4.0}
    a = AssignableMetrics(1)
    a.update(9)
    assert (a.get_value_and_reset(), a.get_value_and_reset()) == (9, 9)


def _wc():
    b = TopologyBuilder("wc")
    s = b.add_spout("sentence", WordSpout, par=1)
    sp = b.add_bolt("split", Splitter, par=2, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("count", Counter, par=3, inputs={sp: Grouping.fields("word")})
    return b.build()


def test_topology_context():
    topo = _wc()
    seen = []
    ctx = TopologyContext(topo, round_robin(topo, 2), 2, {"k": 1}, metrics_sink=lambda *a: seen.append(a))
    assert (ctx.get_task_id(), ctx.get_component_id(), ctx.get_topology_name()) == (2, "split", "wc")
    assert ctx.get_cluster_config() == {"k": 1}
    assert ctx.get_component_tasks("count") == [4, 5, 6]
    assert ctx.get_component_tasks("nope") is None
    assert ctx.get_task_to_component_map() == {1: "sentence", 2: "split", 3: "split", 4: "count", 5: "count",
                                               6: "count"}
    assert ctx.get_this_sources() == {StreamId("default", "sentence"): Grouping.SHUFFLE}
    assert ctx.get_sources("count") == {StreamId("default", "split"): Grouping.fields("word")}
    assert ctx.get_sources("nope") is None
    assert ctx.get_num_containers() == 2
    m = CountMetric()
    ctx.register_metric("words", m, 10)
    assert ctx.registered_metrics == {"words": (m, 10)} and seen == [("words", m, 10)]
    with pytest.raises(RuntimeError) as e:
        ctx.register_metric("words", CountMetric(), 10)
    assert str(e.value) == "register_metric('words'): a metric with that name is already registered in task 2"
    with pytest.raises(ValueError) as e2:
        ctx.register_metric("w2", CountMetric(), 0)
    assert str(e2.value) == "register_metric('w2'): time_bucket_in_sec must be an integer > 0, found 0"
    hook = ITaskHook()
    ctx.add_task_hook(hook)
    assert ctx.task_hooks == [hook]
    with pytest.raises(TypeError):
        ctx.add_task_hook(object())


def test_component_config_carries_parallelism_as_heronpy():
    count = _wc().component("count")
    assert count.config == {"topology.component.parallelism": "3"}
    b = TopologyBuilder("t")
    b.add_spout("s", WordSpout, par=2, config={"words": "x y", "topology.component.parallelism": 7})
    assert b.build().component("s").config == {"topology.component.parallelism": "7", "words": "x y"}


def test_class_style_names_specs_registers_and_never_submits_itself():
    calls = []
    previous = submit_hook.set_submit_handler(calls.append)
    try:
        class ClassStyle(Topology):
            config = {"topology.debug": True}
            sentence = WordSpout.spec(par=1)
            split = Splitter.spec(par=2, inputs=[sentence])
            count = Counter.spec(name="counter", par=1, inputs={split: Grouping.fields(["word"])})
    finally:
        submit_hook.set_submit_handler(previous)
    assert calls == []
    assert defined_topologies()[-1] is ClassStyle
    assert Topology not in defined_topologies()
    t = ClassStyle.build()
    assert t.name == "ClassStyle" and [c.name for c in t.components] == ["sentence", "split", "counter"]
    assert t.config == {"topology.debug": "true"}


def test_class_style_can_name_streams_of_specs_not_yet_named():
    class Streams(Topology):
        s = TwoStreams.spec()
        a = Counter.spec(inputs={s["odds"]: Grouping.fields("label")})
        b = Counter.spec(inputs=[s["evens"]])

    t = Streams.build()
    assert [(i.component, i.stream) for i in t.component("a").inputs] == [("s", "odds")]
    assert [(i.component, i.stream) for i in t.component("b").inputs] == [("s", "evens")]


def test_build_and_submit_without_the_cli_says_how_to_run_it():
    previous = submit_hook.set_submit_handler(None)
    try:
        b = TopologyBuilder("wc")
        b.add_spout("s", WordSpout, par=1)
        with pytest.raises(RuntimeError) as e:
            b.build_and_submit()
    finally:
        submit_hook.set_submit_handler(previous)
    assert str(e.value) == ("topology 'wc' was built outside heron-py's submitter: run the file with "
                            "`heron-py submit local FILE` (or use heron_py.testing to run it in a test)")


def test_build_and_submit_hands_the_plan_to_the_handler():
    got = []
    previous = submit_hook.set_submit_handler(got.append)
    try:
        b = TopologyBuilder("wc")
        b.add_spout("s", WordSpout, par=1)
        b.build_and_submit()
    finally:
        submit_hook.set_submit_handler(previous)
    assert [t.name for t in got] == ["wc"]
