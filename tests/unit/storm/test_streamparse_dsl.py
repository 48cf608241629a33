"""streamparse's Topology DSL → TopologyDef (heron_py.storm.streamparse_dsl)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from streamparse import Bolt, Grouping, JavaBolt, JavaSpout, ShellBolt, Spout, Stream, TicklessBatchingBolt, Topology

from heron_py.cli.submit import load_topology_file
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import validate
from heron_py.planner.model import ComponentKind, GroupingKind
from heron_py.storm import CLASS_KEY, ENV_VAR, MODE_KEY
from heron_py.storm.native import PystormBolt, PystormSpout
from heron_py.storm.streamparse_dsl import translate

PROJECT = Path(__file__).resolve().parents[3] / "examples" / "streamparse" / "wordcount"


class Src(Spout):
    outputs = ["word", "n", Stream(["x"], name="other"), Stream(["d"], name="direct", direct=True)]


class Sink(Bolt):
    outputs = ["word"]


class Quiet(Bolt):
    pass


class SlowInit(TicklessBatchingBolt):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)


def test_the_unchanged_quickstart_project_translates():
    topo = load_topology_file(PROJECT / "topologies" / "wordcount.py", [])
    assert str(PROJECT / "src") in sys.path
    assert topo.name == "wordcount"  # sparse names a topology after its file
    spout, bolt = topo.components
    assert (spout.name, spout.kind, spout.par, spout.class_name) == ("word_spout", ComponentKind.SPOUT, 1,
                                                                      "spouts.words:WordSpout")
    assert spout.config[CLASS_KEY] == "spouts.words:WordSpout"
    assert [(s.name, s.fields) for s in spout.outputs] == [("default", ("word",))]
    assert (bolt.name, bolt.par, bolt.class_name) == ("count_bolt", 2, "bolts.wordcount:WordCountBolt")
    (i,) = bolt.inputs
    assert (i.component, i.stream, i.grouping.kind, i.grouping.fields) == ("word_spout", "default",
                                                                           GroupingKind.FIELDS, ("word",))
    assert [(s.name, s.fields) for s in bolt.outputs] == [("default", ("word", "count"))]
    assert topo.config["topology.reliability.mode"] == "ATLEAST_ONCE"  # Storm acks by default
    validate(topo)


def test_every_grouping_and_named_streams():
    class G(Topology):
        src = Src.spec(par=2)
        shuffle = Sink.spec(inputs={src: Grouping.SHUFFLE})
        fields = Sink.spec(inputs={src: Grouping.fields("word", "n")})
        glob = Sink.spec(inputs={src: Grouping.GLOBAL})
        all_ = Sink.spec(name="all", inputs={src: Grouping.ALL})
        none = Sink.spec(inputs={src: Grouping.NONE})
        direct = Sink.spec(inputs={src["direct"]: Grouping.DIRECT})
        local = Sink.spec(inputs={src: Grouping.LOCAL_OR_SHUFFLE})
        listed = Sink.spec(inputs=[src, src["other"]], par=3)

    topo = translate(G)
    validate(topo)
    kinds = {c.name: [(i.stream, i.grouping.kind, i.grouping.fields) for i in c.inputs]
             for c in topo.components if c.inputs}
    assert kinds == {
        "shuffle": [("default", GroupingKind.SHUFFLE, ())],
        "fields": [("default", GroupingKind.FIELDS, ("word", "n"))],
        "glob": [("default", GroupingKind.LOWEST, ())],
        "all": [("default", GroupingKind.ALL, ())],
        "none": [("default", GroupingKind.NONE, ())],
        "direct": [("direct", GroupingKind.DIRECT, ())],
        "local": [("default", GroupingKind.LOCAL_OR_SHUFFLE, ())],
        "listed": [("default", GroupingKind.SHUFFLE, ()), ("other", GroupingKind.SHUFFLE, ())],
    }
    src = topo.component("src")
    assert [(s.name, s.fields, s.direct) for s in src.outputs] == [
        ("default", ("word", "n"), False), ("other", ("x",), False), ("direct", ("d",), True)]
    assert topo.name == "G" and topo.component("listed").par == 3


def test_config_topology_and_component_level():
    class C(Topology):
        config = {"topology.workers": 2, "topology.acker.executors": 0, "my.key": "v"}
        src = Src.spec(config={"topology.tick.tuple.freq.secs": 1, "nested": {"a": [1]}})
        sink = Sink.spec(inputs=[src])

    topo = translate(C)
    assert topo.config["topology.stmgrs"] == "2"
    assert topo.config["topology.reliability.mode"] == "ATMOST_ONCE"
    assert topo.config["my.key"] == "v"
    cfg = topo.component("src").config
    assert cfg["topology.tick.tuple.freq.secs"] == "1" and "__pickled__" in cfg["nested"]


def test_adapters_and_main_classes():
    class M(Topology):
        src = Src.spec()
        sink = Quiet.spec(inputs=[src])

    topo = translate(M)
    assert topo.component("src").class_name == f"{__name__}:Src"
    assert topo.component("sink").config[CLASS_KEY] == f"{__name__}:Quiet"
    import pickle

    assert pickle.loads(topo.component("src").class_ref.data) is PystormSpout
    assert pickle.loads(topo.component("sink").class_ref.data) is PystormBolt


def test_java_bolt_is_refused():
    class J(Topology):
        src = Src.spec()
        java = JavaBolt.spec(full_class_name="com.example.Count", args_list=[], inputs=[src])

    with pytest.raises(TopologyError) as e:
        translate(J)
    assert str(e.value) == (
        "streamparse topology 'J': component 'java' is a JavaBolt (com.example.Count); heron-py runs Python "
        "components only (pystorm/streamparse Bolt and Spout classes, or ShellBolt/ShellSpout commands)")


def test_java_spout_is_refused():
    class J(Topology):
        kafka = JavaSpout.spec(full_class_name="org.apache.storm.kafka.KafkaSpout", args_list=[],
                               outputs=["msg"])
        sink = Sink.spec(inputs=[kafka])

    with pytest.raises(TopologyError, match=r"^streamparse topology 'J': component 'kafka' is a JavaSpout "
                                            r"\(org.apache.storm.kafka.KafkaSpout\); heron-py runs Python"):
        translate(J)


def test_java_custom_grouping_is_refused():
    class J(Topology):
        src = Src.spec()
        sink = Sink.spec(inputs={src: Grouping.custom_object("com.example.MyGrouping", [])})

    with pytest.raises(TopologyError) as e:
        translate(J)
    assert str(e.value) == (
        "streamparse topology 'J': bolt 'sink': input from 'src' stream 'default' uses a Java custom grouping "
        "(com.example.MyGrouping); heron-py runs Python groupings only: expected SHUFFLE, fields(...), GLOBAL, "
        "ALL, NONE, DIRECT or LOCAL_OR_SHUFFLE")


def test_unknown_input_is_refused_by_streamparse_when_the_class_is_defined():
    # streamparse's metaclass checks inputs while the topology file runs, before heron-py sees
    # the class: its own error (a KeyError naming the component) is what the user gets
    stray = Src.spec(name="stray")
    with pytest.raises(KeyError, match="stray"):
        class U(Topology):
            src = Src.spec()
            sink = Sink.spec(inputs=[stray])


def test_direct_stream_with_a_shuffle_grouping_is_refused_by_validation():
    class D(Topology):
        src = Src.spec()
        sink = Sink.spec(inputs={src["direct"]: Grouping.SHUFFLE})

    with pytest.raises(TopologyError, match="direct"):
        validate(translate(D))


def test_bad_mode_is_refused():
    class B(Topology):
        src = Src.spec(config={MODE_KEY: "thread"})
        sink = Sink.spec(inputs=[src])

    with pytest.raises(TopologyError) as e:
        translate(B)
    assert str(e.value) == ("streamparse topology 'B': spout 'src': config heron_py.pystorm.mode is 'thread'; "
                            "expected 'native' or 'subprocess'")


def test_tickless_batching_bolt_with_its_own_init_is_refused():
    class B(Topology):
        src = Src.spec()
        sink = SlowInit.spec(inputs=[src])

    with pytest.raises(TopologyError, match=r"^streamparse topology 'B': bolt 'sink': TicklessBatchingBolt "
                                            r"subclass SlowInit overrides __init__"):
        translate(B)


def test_per_environment_parallelism(monkeypatch):
    class P(Topology):
        src = Src.spec(par={"prod": 8, "local": 1})
        sink = Sink.spec(inputs=[src])

    with pytest.raises(TopologyError) as e:
        translate(P)
    assert str(e.value) == ("streamparse topology 'P': spout 'src': par is per environment (['local', 'prod']); "
                            "expected $HERON_PY_STREAMPARSE_ENV naming one of them, found None")
    monkeypatch.setenv(ENV_VAR, "prod")
    assert translate(P).component("src").par == 8


def test_subprocess_mode_runs_streamparse_run():  # pragma: no cover - needs heron_py.api.shell
    sys.path.insert(0, str(PROJECT / "src"))
    from bolts.wordcount import WordCountBolt

    class S(Topology):
        src = Src.spec()
        count = WordCountBolt.spec(inputs=[src], config={MODE_KEY: "subprocess"})

    comp = translate(S).component("count")
    assert comp.class_name == "bolts.wordcount:WordCountBolt"
    assert CLASS_KEY not in comp.config


def test_shell_bolt_runs_its_command():  # pragma: no cover - needs heron_py.api.shell
    class S(Topology):
        src = Src.spec()
        sh = ShellBolt.spec(command="node", script="count.js", inputs=[src], outputs=["w"])

    assert translate(S).component("sh").kind is ComponentKind.BOLT


def test_subprocess_mode_needs_a_module_class():
    class S(Topology):
        src = Src.spec()
        sink = Sink.spec(inputs=[src], config={MODE_KEY: "subprocess"})

    Sink.__module__, old = "__main__", Sink.__module__
    try:
        with pytest.raises(TopologyError, match=r"^streamparse topology 'S': bolt 'sink': class Sink is defined "
                                                r"in the topology file"):
            translate(S)
    finally:
        Sink.__module__ = old
