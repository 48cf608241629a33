"""The topology API with heronpy's names, and the checks of the logical plan (verbatim errors)."""

import pickle
from dataclasses import replace

import pytest

from heron_py.api.component.component_spec import GlobalStreamId
from heron_py.api.stream import Grouping, Stream
from heron_py.api.topology import Topology, TopologyBuilder
from heron_py.common.config_codec import restore_config, sanitize_config
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate
from heron_py.planner.model import GroupingKind, TopologyDef
from heron_py.planner.packing import round_robin
from heron_py.testing import run_in_process
from tests.fakes import Counter, Splitter, TwoStreams, WordSpout


def wc(name="wc", count_grouping=None):
    b = TopologyBuilder(name)
    s = b.add_spout("sentence", WordSpout, par=1)
    sp = b.add_bolt("split", Splitter, par=2, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("count", Counter, par=2, inputs={sp: count_grouping or Grouping.fields("word")})
    return b


def test_heronpy_aliases_are_the_same_objects():
    from heron_py.api.bolt.bolt import Bolt
    from heron_py.api.spout.spout import Spout
    from heronpy.api.bolt.bolt import Bolt as B1
    from heronpy.api.spout.spout import Spout as S1
    from heronpy.api.stream import Grouping as G1
    from heronpy.api.topology import TopologyBuilder as T1

    assert (Bolt, Spout, Grouping, TopologyBuilder) == (B1, S1, G1, T1)


def test_builder_and_class_style_give_the_same_plan():
    class WordCount(Topology):
        sentence = WordSpout.spec(par=1)
        split = Splitter.spec(par=2, inputs={sentence: Grouping.SHUFFLE})
        count = Counter.spec(par=2, inputs={split: Grouping.fields("word")})

    assert WordCount.build("wc") == wc().build()


def test_inputs_as_list_dict_and_global_stream_id():
    b = TopologyBuilder("t")
    s = b.add_spout("s", TwoStreams, par=1)
    b.add_bolt("a", Counter, par=1, inputs=[s["evens"]])
    b.add_bolt("b", Counter, par=1, inputs={s["odds"]: Grouping.fields("label")})
    t = b.build()
    a, bb = t.component("a"), t.component("b")
    assert (a.inputs[0].stream, a.inputs[0].grouping.kind) == ("evens", GroupingKind.SHUFFLE)
    assert (bb.inputs[0].stream, bb.inputs[0].grouping.fields) == ("odds", ("label",))
    assert {s.name: s.fields for s in t.component("s").outputs} == {"evens": ("n",), "odds": ("n", "label")}


def test_config_round_trips_as_heronpy():
    raw = {"b": True, "i": 12, "f": 1.5, "s": "abc", "n": "12", "obj": {"x": [1, 2]}}
    stored = sanitize_config(raw, "here")
    assert stored["b"] == "true" and stored["i"] == "12" and stored["f"] == "1.5"
    assert restore_config(stored) == {"b": True, "i": 12, "f": 1.5, "s": "abc", "n": 12, "obj": {"x": [1, 2]}}
    with pytest.raises(TypeError) as e:
        sanitize_config({1: "x"}, "config of bolt 'c'")
    assert str(e.value) == "config of bolt 'c': config keys must be str, found 1 (int)"


def _err(topo: TopologyDef) -> str:
    with pytest.raises(TopologyError) as e:
        validate(topo)
    return str(e.value)


def test_unknown_component_in_an_input():
    b = TopologyBuilder("wc")
    b.add_spout("sentence", WordSpout, par=1)
    b.add_bolt("count", Counter, par=1, inputs=["splitt"])
    assert _err(b.build()) == ("topology 'wc': bolt 'count' takes input from 'splitt', which is not a component "
                               "of this topology (components: ['count', 'sentence'])")


def test_unknown_stream_in_an_input():
    b = TopologyBuilder("wc")
    s = b.add_spout("sentence", WordSpout, par=1)
    with pytest.raises(TopologyError) as e:
        s["words"]
    assert str(e.value) == "component 'sentence' has no output stream 'words' (declared streams: ['default'])"
    b.add_bolt("count", Counter, par=1, inputs=[GlobalStreamId("sentence", "words")])
    assert _err(b.build()) == ("topology 'wc': bolt 'count' takes input from 'sentence' stream 'words', which "
                               "'sentence' does not declare (declared streams: ['default'])")


def test_grouping_on_a_field_the_stream_does_not_declare():
    assert _err(wc(count_grouping=Grouping.fields("wrd")).build()) == (
        "topology 'wc': bolt 'count' input from 'split' stream 'default' groups on field 'wrd', which that "
        "stream does not declare (declared fields: ['word'])")


def test_parallelism_below_one():
    t = wc().build()
    bad = replace(t, components=tuple(replace(c, par=0) if c.name == "split" else c for c in t.components))
    assert _err(bad) == "topology 'wc': bolt 'split' has parallelism 0; expected an integer >= 1"
    with pytest.raises(TopologyError) as e:
        wc_b = TopologyBuilder("wc")
        wc_b.add_spout("s", WordSpout, par="2")
        wc_b.build()
    assert str(e.value) == "spout 's': parallelism must be an integer >= 1, found '2'"


def test_duplicate_names():
    b = TopologyBuilder("wc")
    b.add_spout("x", WordSpout, par=1)
    with pytest.raises(TopologyError) as e:
        b.add_bolt("x", Counter, par=1, inputs=["x"])
    assert str(e.value) == "topology 'wc': component name 'x' is used twice; component names must be unique"


def test_spout_with_inputs_and_bolts_no_spout_reaches():
    t = wc().build()
    split = t.component("split")
    spout_with_input = replace(t, components=tuple(
        replace(c, inputs=split.inputs) if c.name == "sentence" else c for c in t.components))
    assert _err(spout_with_input) == "topology 'wc': spout 'sentence' has inputs (sentence); spouts take no input"
    b = TopologyBuilder("wc")
    b.add_spout("s", WordSpout, par=1)
    b.add_bolt("a", Splitter, par=1, inputs=["b"])
    b.add_bolt("b", Splitter, par=1, inputs=["a"])
    assert _err(b.build()) == ("topology 'wc': bolts ['a', 'b'] are not reachable from any spout (no inputs, or "
                               "a cycle that no spout feeds); every bolt must descend from a spout")


def test_no_spout_and_bad_name():
    t = wc().build()
    assert _err(replace(t, components=t.components[1:])) == "topology 'wc': has no spout; expected at least one"
    with pytest.raises(TopologyError) as e:
        TopologyBuilder("my topology")
    assert str(e.value) == ("topology name 'my topology' is not valid: expected letters, digits, '.', '_' or '-'")


def test_direct_grouping_needs_a_direct_stream():
    b = TopologyBuilder("wc")
    s = b.add_spout("s", TwoStreams, par=1)
    b.add_bolt("a", Counter, par=1, inputs={s["evens"]: Grouping.DIRECT})
    assert _err(b.build()) == ("topology 'wc': bolt 'a' subscribes to 's' stream 'evens' with direct grouping, "
                               "but that stream is not declared direct (expected Stream(..., direct=True))")


def test_non_serializable_parts_are_refused_at_build():
    def make():
        class Local(WordSpout):
            pass
        return Local

    b = TopologyBuilder("wc")
    b.add_spout("s", make(), par=1)
    with pytest.raises(TopologyError) as e:
        b.build()
    assert str(e.value) == ("spout 's': class test_non_serializable_parts_are_refused_at_build.<locals>.make."
                            "<locals>.Local is defined inside a function; define it at module level so every "
                            "container can import it")
    b = TopologyBuilder("wc")
    b.add_spout("s", WordSpout, par=1, config={"lock": __import__("threading").Lock()})
    with pytest.raises(TopologyError) as e2:
        b.build()
    assert str(e2.value) == ("config of spout 's': value of config key 'lock' cannot be serialized "
                             "(lock: cannot pickle '_thread.lock' object)")


def test_round_robin_packing():
    p = round_robin(wc().build(), 2)
    assert [(t.task_id, t.component, t.container) for t in p.tasks] == [
        (1, "sentence", 0), (2, "split", 1), (3, "split", 0), (4, "count", 1), (5, "count", 0)]
    with pytest.raises(TopologyError) as e:
        round_robin(wc().build(), 6)
    assert str(e.value) == "topology 'wc': 6 containers for 5 tasks; expected at most one container per task"
    with pytest.raises(TopologyError) as e:
        round_robin(wc().build(), 0)
    assert str(e.value) == "topology 'wc': number of containers must be an integer >= 1, found 0"


def test_plan_round_trips_through_json():
    t = wc().build()
    assert TopologyDef.from_dict(t.to_dict()) == t
    cls = pickle.loads(t.component("count").class_ref.data)
    assert cls is Counter


def test_in_process_run_with_real_routing():
    res = run_in_process(wc(), containers=2, capture=["count"])
    got = sorted(v[0] for v in res.values("count"))
    assert got == sorted(["a", "b", "c", "d", "e", "f", "g", "h"])
    tasks_of = {}
    for r in res.received["count"]:
        tasks_of.setdefault(r.values[0], set()).add(r.task)
    assert all(len(t) == 1 for t in tasks_of.values())


def test_stream_declarations():
    assert Stream(["a"], name="x", direct=True).direct
    with pytest.raises(TypeError) as e:
        Stream([1])
    assert str(e.value) == "Stream 'default': field names must be str, found 1"
