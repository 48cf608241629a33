"""Every user mistake in a topology ends in one message (what, where, expected, found),
asserted verbatim. Complements test_logical.py."""

from dataclasses import replace

import pytest

from heron_py.api.component.component_spec import GlobalStreamId
from heron_py.api.stream import Grouping, Stream
from heron_py.api.topology import Topology, TopologyBuilder
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate
from heron_py.planner.model import TopologyDef
from tests.fakes import Counter, Splitter, TwoStreams, WordSpout


class Silent(WordSpout):
    outputs = []


class DirectSpout(WordSpout):
    outputs = [Stream(["n"], name="tens", direct=True)]


class Unpicklable:
    def __reduce__(self):
        raise TypeError("no pickling here")

    def choose_tasks(self, values):
        return []


def _err(topo: TopologyDef) -> str:
    with pytest.raises(TopologyError) as e:
        validate(topo)
    return str(e.value)


def _raises(fn, *args, **kwargs) -> str:
    with pytest.raises(TopologyError) as e:
        fn(*args, **kwargs)
    return str(e.value)


def test_topology_error_is_a_value_error_as_heronpy_raised():
    assert issubclass(TopologyError, ValueError)


def test_a_valid_word_count_passes():
    b = TopologyBuilder("wc")
    s = b.add_spout("sentence", WordSpout, par=1)
    sp = b.add_bolt("split", Splitter, par=2, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("count", Counter, par=2, inputs={sp: Grouping.fields("word")})
    b.add_bolt("loop", Splitter, par=1, inputs=[sp, "loop"])  # a cycle a spout feeds is fine
    validate(b.build())


def test_bad_topology_name_in_the_plan():
    b = TopologyBuilder("wc")
    b.add_spout("s", WordSpout, par=1)
    assert _err(replace(b.build(), name="")) == ("topology name '' is not valid: expected letters, digits, '.', "
                                                  "'_' or '-'")
    assert _raises(TopologyBuilder, "a/b") == ("topology name 'a/b' is not valid: expected letters, digits, "
                                                "'.', '_' or '-'")


def test_bad_and_reserved_component_names_at_add_time():
    b = TopologyBuilder("wc")
    assert _raises(b.add_spout, "a b", WordSpout, 1) == ("topology 'wc': component name 'a b' is not valid: "
                                                          "expected letters, digits, '.', '_' or '-'")
    assert _raises(b.add_spout, "config", WordSpout, 1) == ("topology 'wc': component name 'config' is reserved "
                                                             "(it holds the topology config)")
    assert _raises(b.add_spout, None, WordSpout, 1) == ("topology 'wc': a component has no name; expected a str "
                                                         "name, found None")


def test_duplicate_names_in_a_class_style_topology():
    with pytest.raises(TopologyError) as e:
        class Dup(Topology):
            a = WordSpout.spec(par=1)
            b = WordSpout.spec(name="a", par=1)
    assert str(e.value) == "topology 'Dup': component name 'a' is used twice; component names must be unique"


def test_duplicate_names_in_the_plan():
    b = TopologyBuilder("wc")
    b.add_spout("s", WordSpout, par=1)
    t = b.build()
    assert _err(replace(t, components=t.components * 2)) == (
        "topology 'wc': component name 's' is used twice; component names must be unique")


def test_spout_without_outputs():
    b = TopologyBuilder("wc")
    b.add_spout("s", Silent, par=1)
    assert _err(b.build()) == ("topology 'wc': spout 's' declares no output streams; expected at least one "
                               "(outputs = [...] on tests.unit.planner.test_validation:Silent)")


def test_non_direct_grouping_on_a_direct_stream():
    b = TopologyBuilder("wc")
    s = b.add_spout("s", DirectSpout, par=1)
    b.add_bolt("a", Counter, par=1, inputs={s["tens"]: Grouping.SHUFFLE})
    assert _err(b.build()) == ("topology 'wc': bolt 'a' subscribes to direct stream 'tens' of 's' with shuffle "
                               "grouping; a direct stream needs Grouping.DIRECT")
    b = TopologyBuilder("wc")
    s = b.add_spout("s", DirectSpout, par=1)
    b.add_bolt("a", Counter, par=1, inputs={s["tens"]: Grouping.DIRECT})
    validate(b.build())


def test_partial_key_on_a_missing_field_and_multi_field_groupings():
    b = TopologyBuilder("wc")
    s = b.add_spout("s", TwoStreams, par=1)
    b.add_bolt("a", Counter, par=1, inputs={s["odds"]: Grouping.partial_key("n", "lbl")})
    assert _err(b.build()) == ("topology 'wc': bolt 'a' input from 's' stream 'odds' groups on field 'lbl', which "
                               "that stream does not declare (declared fields: ['n', 'label'])")


def test_bolt_without_inputs_is_unreachable():
    b = TopologyBuilder("wc")
    b.add_spout("s", WordSpout, par=1)
    b.add_bolt("lonely", Counter, par=1, inputs=None)
    assert _err(b.build()) == ("topology 'wc': bolts ['lonely'] are not reachable from any spout (no inputs, or a "
                               "cycle that no spout feeds); every bolt must descend from a spout")


def test_builder_refuses_what_cannot_travel_or_is_malformed():
    b = TopologyBuilder("wc")
    s = b.add_spout("s", WordSpout, par=True)
    assert _raises(b.build) == "spout 's': parallelism must be an integer >= 1, found True"

    b = TopologyBuilder("wc")
    s = b.add_spout("s", WordSpout, par=1)
    b.add_bolt("c", Counter, par=1, inputs={s: "fields"})
    assert _raises(b.build) == ("bolt 'c': input from 's' has grouping 'fields'; expected a Grouping "
                                "(Grouping.SHUFFLE, Grouping.fields(...), ...)")

    b = TopologyBuilder("wc")
    s = b.add_spout("s", WordSpout, par=1)
    b.add_bolt("c", Counter, par=1, inputs={s: Grouping.SHUFFLE, GlobalStreamId("s", "default"): Grouping.ALL})
    assert _raises(b.build) == ("bolt 'c': subscribes to 's' stream 'default' twice; expected one grouping per "
                                "input stream")

    b = TopologyBuilder("wc")
    b.add_spout("s", WordSpout, par=1)
    b.add_bolt("c", Counter, par=1, inputs=42)
    assert _raises(b.build) == ("bolt 'c': inputs must be a dict {component: Grouping} or a list of components, "
                                "found int")

    b = TopologyBuilder("wc")
    b.add_spout("s", WordSpout, par=1, optional_outputs=["word"])
    assert _raises(b.build) == ("spout 's': stream 'default' declares field(s) ['word'] more than once; expected "
                                "distinct field names (found ['word', 'word'])")

    b = TopologyBuilder("wc")
    b.add_spout("s", WordSpout, par=1, optional_outputs=[Stream(["a"], name="x"), Stream(["b"], name="x")])
    assert _raises(b.build) == "spout 's': stream 'x' is declared twice in outputs; expected one Stream per stream name"


def test_class_paths_as_heronpy_strings():
    from heron_py.api.component.component_spec import HeronComponentSpec

    b = TopologyBuilder("wc")
    b.add_spec(HeronComponentSpec("s", "tests.fakes.WordSpout", True, 1, outputs=["word"]))
    assert b.build().component("s").class_name == "tests.fakes:WordSpout"
    b = TopologyBuilder("wc")
    b.add_spec(HeronComponentSpec("s", "tests.fakes.NoSuchSpout", True, 1, outputs=["word"]))
    assert _raises(b.build) == ("spout 's': class 'tests.fakes.NoSuchSpout' cannot be imported "
                                "(module 'tests.fakes' has no attribute 'NoSuchSpout'); expected "
                                "'module.Class'")


def test_unpicklable_custom_grouping_and_config():
    assert _raises(Grouping.custom, Unpicklable()) == (
        "custom grouping Unpicklable cannot be serialized (pickle: no pickling here); define it at module level "
        "of the topology file or a module")
    b = TopologyBuilder("wc")
    b.add_spout("s", WordSpout, par=1)
    b.set_config({"topology.thing": Unpicklable()})
    assert _raises(b.build) == ("config of topology 'wc': value of config key 'topology.thing' cannot be "
                                "serialized (Unpicklable: no pickling here)")
