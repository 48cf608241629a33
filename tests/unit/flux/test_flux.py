"""Storm Flux YAML files → TopologyDef: parsing, substitution, includes, groupings, errors."""

from __future__ import annotations

import pickle
import textwrap
from pathlib import Path

import pytest

from heron_py.flux import FluxError, load_flux
from heron_py.flux.builtins import WORDS, LogInfoBolt, TestWordCounter, TestWordSpout, storm_tuple_text
from heron_py.flux.source import parse_properties, substitute
from heron_py.planner.model import GroupingKind, TopologyDef

FLUX = Path(__file__).resolve().parents[2] / "flux"

WORD_COUNT = """\
name: "wc"
spouts:
  - id: "spout-1"
    className: "org.apache.storm.testing.TestWordSpout"
bolts:
  - id: "count"
    className: "org.apache.storm.testing.TestWordCounter"
streams:
  - name: "spout --> count"
    from: "spout-1"
    to: "count"
    grouping:
      type: FIELDS
      args: ["word"]
"""


def load(path: Path, filter_file: Path | None = None, env: dict[str, str] | None = None) -> TopologyDef:
    return load_flux(path, filter_file=filter_file, env=env or {})


def write(tmp_path: Path, text: str, name: str = "t.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def error(tmp_path: Path, text: str, **kw: object) -> str:
    with pytest.raises(FluxError) as e:
        load(write(tmp_path, text), **kw)  # type: ignore[arg-type]
    return str(e.value)


def comp(t: TopologyDef, name: str):  # type: ignore[no-untyped-def]
    return next(c for c in t.components if c.name == name)


# --- parsing -----------------------------------------------------------------------------


def test_word_count_file_builds_the_storm_builtins():
    t = load(FLUX / "word_count.yaml")
    assert t.name == "flux-word-count"
    assert [(c.name, c.class_name, c.par) for c in t.components] == [
        ("spout-1", "heron_py.flux.builtins:TestWordSpout", 1),
        ("bolt-1", "heron_py.flux.builtins:TestWordCounter", 2),
        ("bolt-2", "heron_py.flux.builtins:LogInfoBolt", 1),
    ]
    assert comp(t, "spout-1").outputs[0].fields == ("word",)
    assert comp(t, "bolt-1").outputs[0].fields == ("word", "count")
    assert comp(t, "bolt-2").outputs == ()
    (inp,) = comp(t, "bolt-1").inputs
    assert (inp.component, inp.stream, inp.grouping.kind, inp.grouping.fields) == (
        "spout-1", "default", GroupingKind.FIELDS, ("word",))


def test_storm_config_keys_map_to_heron_py_keys(tmp_path):
    t = load(write(tmp_path, WORD_COUNT + textwrap.dedent("""\
        config:
          topology.workers: 3
          topology.debug: true
          topology.max.spout.pending: 50
          topology.message.timeout.secs: 12
          topology.acker.executors: 0
        """)))
    assert t.config == {"topology.workers": "3", "topology.stmgrs": "3", "topology.debug": "true",
                        "topology.max.spout.pending": "50", "topology.message.timeout.secs": "12",
                        "topology.acker.executors": "0", "topology.reliability.mode": "ATMOST_ONCE"}


def test_ackers_turn_acking_on_and_explicit_heron_keys_win(tmp_path):
    t = load(write(tmp_path, WORD_COUNT + textwrap.dedent("""\
        config:
          topology.acker.executors: 2
          topology.workers: 3
          topology.stmgrs: 2
        """)))
    assert t.config["topology.reliability.mode"] == "ATLEAST_ONCE"
    assert t.config["topology.stmgrs"] == "2"


def test_every_grouping_type_and_python_classes_relative_to_the_file():
    t = load(FLUX / "groupings.yaml")
    kinds = {c.name: (c.inputs[0].stream, c.inputs[0].grouping.kind, c.inputs[0].grouping.fields)
             for c in t.components if c.inputs}
    assert kinds == {
        "shuffle": ("default", GroupingKind.SHUFFLE, ()),
        "fields": ("default", GroupingKind.FIELDS, ("n",)),
        "all": ("default", GroupingKind.ALL, ()),
        "global": ("default", GroupingKind.LOWEST, ()),
        "none": ("default", GroupingKind.NONE, ()),
        "direct": ("direct", GroupingKind.DIRECT, ()),
        "local": ("default", GroupingKind.LOCAL_OR_SHUFFLE, ()),
        "custom": ("default", GroupingKind.CUSTOM, ()),
    }
    custom = comp(t, "custom")
    grouper = pickle.loads(custom.inputs[0].grouping.custom.data)  # type: ignore[union-attr]
    assert type(grouper).__name__ == "FirstTask" and grouper.width == 2  # constructorArgs: ref "two"
    assert custom.config["print.prefix"] == ">"  # properties → component config
    assert comp(t, "numbers").class_name == "flux_components:NumberSpout"


def test_test_word_spout_not_distributed_runs_one_task(tmp_path):
    t = load(write(tmp_path, WORD_COUNT.replace('TestWordSpout"', 'TestWordSpout"\n    parallelism: 4\n'
                                                '    constructorArgs: [false]')))
    assert comp(t, "spout-1").par == 1


# --- substitution ------------------------------------------------------------------------


def test_filter_properties_and_environment_are_substituted():
    t = load(FLUX / "substitution.yaml", FLUX / "substitution.properties", {"FLUX_TEST_VALUE": "from-env"})
    assert t.name == "substitution-topology"
    assert t.config["test.env.value"] == "from-env"
    assert t.config["list.element.property.target"] == "A string list"
    assert comp(t, "spout-1").par == 3


def test_properties_file_forms():
    assert parse_properties("# c\n! c\n\na=1\nb: two words\nc 3\n", "f") == {"a": "1", "b": "two words",
                                                                            "c": "3"}


def test_every_placeholder_of_a_line_is_replaced_and_comments_are_left():
    text = "x: ${a}-${ENV-B}\n# ${missing}\n"
    assert substitute(text, "f.yaml", {"a": "1"}, "p", {"B": "2"}) == "x: 1-2\n# ${missing}\n"


# --- includes ----------------------------------------------------------------------------


def test_include_without_override_only_fills_gaps():
    t = load(FLUX / "include_main.yaml")
    assert t.name == "include-main"
    assert t.config["topology.stmgrs"] == "1" and t.config["topology.debug"] == "true"
    assert comp(t, "spout-1").par == 2
    assert [c.name for c in t.components] == ["spout-1", "log"]


def test_include_with_override_replaces():
    t = load(FLUX / "include_override.yaml")
    assert t.name == "from-include"
    assert t.config["topology.stmgrs"] == "3"
    assert comp(t, "spout-1").par == 4


# --- built-ins ---------------------------------------------------------------------------


class FakeDelegate:
    logger = None

    def __init__(self) -> None:
        self.emitted: list[list[object]] = []

    def emit(self, tup, stream, anchors, direct_task, need_task_ids, tup_id):  # type: ignore[no-untyped-def]
        self.emitted.append(list(tup))


def test_builtins_behave_as_storms(monkeypatch, caplog):
    d = FakeDelegate()
    spout = TestWordSpout(d)  # type: ignore[arg-type]
    spout.initialize({}, None)
    slept: list[float] = []
    monkeypatch.setattr("heron_py.flux.builtins.time.sleep", slept.append)
    for _ in range(20):
        spout.next_tuple()
    assert slept == [0.1] * 20 and all(len(v) == 1 and v[0] in WORDS for v in d.emitted)
    d = FakeDelegate()
    counter = TestWordCounter(d)  # type: ignore[arg-type]
    counter.initialize({}, None)
    Tup = type("Tup", (), {})
    for w in ["mike", "golda", "mike"]:
        t = Tup()
        t.values = [w]  # type: ignore[attr-defined]
        counter.process(t)
    assert d.emitted == [["mike", 1], ["golda", 1], ["mike", 2]]
    assert TestWordCounter.auto_ack and TestWordCounter.auto_anchor
    t = Tup()
    t.values, t.component, t.task, t.stream = ["mike", 2], "count", 3, "default"  # type: ignore[attr-defined]
    log = LogInfoBolt(FakeDelegate())  # type: ignore[arg-type]
    log.initialize({}, None)
    with caplog.at_level("INFO"):
        log.process(t)
    assert storm_tuple_text(t) == "source: count:3, stream: default, id: {}, [mike, 2]"
    assert caplog.records[-1].getMessage() == "source: count:3, stream: default, id: {}, [mike, 2]"
    assert caplog.records[-1].name == "org.apache.storm.flux.wrappers.bolts.LogInfoBolt"


# --- errors, verbatim --------------------------------------------------------------------


def test_unknown_java_class(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace("org.apache.storm.testing.TestWordCounter", "org.apache.storm.foo.Bar"))
    assert msg == (
        "flux file t.yaml: bolt 'count' className 'org.apache.storm.foo.Bar' is a Java class; heron-py runs "
        "Python components only: use one of org.apache.storm.testing.TestWordSpout, "
        "org.apache.storm.flux.wrappers.spouts.FluxShellSpout, org.apache.storm.spout.ShellSpout, "
        "org.apache.storm.kafka.spout.KafkaSpout, "
        "org.apache.storm.testing.TestWordCounter, org.apache.storm.flux.wrappers.bolts.LogInfoBolt, "
        "org.apache.storm.flux.wrappers.bolts.FluxShellBolt, org.apache.storm.task.ShellBolt, "
        "org.apache.storm.kafka.bolt.KafkaBolt, org.apache.storm.redis.bolt.RedisStoreBolt, "
        "org.apache.storm.redis.bolt.RedisLookupBolt, org.apache.storm.redis.bolt.RedisFilterBolt, "
        "org.apache.storm.jdbc.bolt.JdbcInsertBolt, "
        "org.apache.storm.jdbc.bolt.JdbcLookupBolt or a Python class "
        "'module.Class' (a Java ShellBolt/ShellSpout subclass: declare it as "
        "org.apache.storm.flux.wrappers.bolts.FluxShellBolt / org.apache.storm.flux.wrappers.spouts.FluxShellSpout "
        "with its command and output fields)")


def test_java_custom_grouping(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace("type: FIELDS", "type: CUSTOM\n      customClass:\n"
                                             "        className: org.apache.storm.testing.NGrouping"))
    assert msg == ("flux file t.yaml: stream 'spout --> count' customClass className "
                   "'org.apache.storm.testing.NGrouping' is a Java class; heron-py can only create Python objects "
                   "here: expected a Python class 'module.Class'")


def test_stream_from_an_unknown_component(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace('from: "spout-1"', 'from: "nope"'))
    assert msg == ("flux file t.yaml: stream 'spout --> count' from 'nope': no spout or bolt has id 'nope'; "
                   "expected one of ['count', 'spout-1']")


def test_stream_to_a_spout(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace('to: "count"', 'to: "spout-1"'))
    assert msg == ("flux file t.yaml: stream 'spout --> count' to 'spout-1': is a spout, which takes no input; "
                   "expected one of ['count']")


def test_fields_grouping_without_args(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace('      args: ["word"]\n', ""))
    assert msg == ("flux file t.yaml: stream 'spout --> count' grouping: type FIELDS needs 'args', the field "
                   "names to group on; expected a list of field names, found None")


def test_fields_grouping_on_a_field_the_source_lacks(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace('args: ["word"]', 'args: ["wrod"]'))
    assert msg.startswith("flux file t.yaml: ") and "wrod" in msg


def test_missing_environment_variable(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace('"wc"', '"${ENV-X}"'))
    assert msg == "flux file t.yaml line 1: ${ENV-X} names environment variable 'X', which is not set"


def test_missing_filter_property(tmp_path):
    props = tmp_path / "p.properties"
    props.write_text("other=1\n")
    msg = error(tmp_path, WORD_COUNT.replace('"wc"', '"${topology.name}"'), filter_file=props)
    assert msg == "flux file t.yaml line 1: ${topology.name}: property 'topology.name' is not defined in filter file " \
                  "p.properties"


def test_property_without_a_filter_file(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace('"wc"', '"${topology.name}"'))
    assert msg == ("flux file t.yaml line 1: ${topology.name} needs a --filter properties file defining "
                   "'topology.name'; none was given")


def test_yaml_syntax_error_names_the_line(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace('    className: "org.apache.storm.testing.TestWordCounter"',
                                             '    className: "org.apache.storm.testing.TestWordCounter'))
    assert msg == ("flux file t.yaml: YAML syntax error at line 9, column 12: expected <block end>, but found "
                   "'<scalar>'")


def test_yaml_syntax_error_bad_indentation(tmp_path):
    msg = error(tmp_path, 'name: "wc"\nspouts:\n  - id: "a"\n   className: x\n')
    assert msg == ("flux file t.yaml: YAML syntax error at line 4, column 4: expected <block end>, but found "
                   "'<block mapping start>'")


def test_wrong_type_of_a_key(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace('TestWordCounter"', 'TestWordCounter"\n    parallelism: "2x"'))
    assert msg == "flux file t.yaml: bolt 'count' key 'parallelism': expected an integer >= 1, found a string ('2x')"


def test_wrong_type_of_a_section(tmp_path):
    msg = error(tmp_path, 'name: "wc"\nspouts: {id: "a"}\n')
    assert msg == "flux file t.yaml: top level key 'spouts': expected a list, found a mapping ({'id': 'a'})"


def test_unknown_key(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace('TestWordCounter"', 'TestWordCounter"\n    paralelism: 2'))
    assert msg.startswith("flux file t.yaml: bolt 'count': unknown key(s) ['paralelism']; expected some of ")


def test_unknown_grouping_type(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace("type: FIELDS", "type: PARTIAL"))
    assert msg == ("flux file t.yaml: stream 'spout --> count' grouping type: expected one of SHUFFLE, FIELDS, ALL, "
                   "GLOBAL, NONE, DIRECT, LOCAL_OR_SHUFFLE, CUSTOM, found 'PARTIAL'")


def test_spout_class_in_bolts(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace("testing.TestWordCounter", "testing.TestWordSpout"))
    assert msg == ("flux file t.yaml: bolt 'count' className 'org.apache.storm.testing.TestWordSpout' is a spout; "
                   "expected a bolt class")


def test_python_class_that_cannot_be_imported(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace("org.apache.storm.testing.TestWordCounter", "nomodule.Bolt"))
    assert msg == (f"flux file t.yaml: bolt 'count' className 'nomodule.Bolt' cannot be imported as a Python "
                   f"class from {tmp_path.resolve()} (ModuleNotFoundError: No module named 'nomodule'); "
                   f"expected 'module.Class'")


def test_resource_include(tmp_path):
    msg = error(tmp_path, 'name: "x"\nincludes:\n  - resource: true\n    file: "/configs/shell_test.yaml"\n')
    assert msg == ("flux file t.yaml: include '/configs/shell_test.yaml' has resource: true, a Java classpath "
                   "resource, which heron-py cannot read; expected resource: false and a file path relative to "
                   "t.yaml")


def test_missing_include(tmp_path):
    msg = error(tmp_path, 'name: "x"\nincludes:\n  - file: "other.yaml"\n')
    assert msg == f"flux file t.yaml: include 'other.yaml': file {tmp_path / 'other.yaml'} does not exist"


def test_topology_source_is_refused(tmp_path):
    msg = error(tmp_path, 'name: "x"\ntopologySource:\n  className: "org.foo.Topo"\n')
    assert msg == ("flux file t.yaml: 'topologySource' names a Java class building a StormTopology; heron-py "
                   "supports the YAML DSL (spouts, bolts, streams) only")


def test_missing_name(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace('name: "wc"\n', ""))
    assert msg == "flux file t.yaml: key 'name' is missing; expected the topology's name"


def test_no_shell_module_or_shell_without_command(tmp_path):
    msg = error(tmp_path, WORD_COUNT.replace("org.apache.storm.testing.TestWordCounter",
                                             "org.apache.storm.flux.wrappers.bolts.FluxShellBolt"))
    assert msg == ("flux file t.yaml: bolt 'count' constructorArgs: expected [[command, args...]] or "
                   "[[command, args...], [output fields]], found []")


# --- shell components (heron_py.api.shell) -----------------------------------------------



def test_shell_components_map_to_heron_py_api_shell():
    t = load(FLUX / "shell.yaml")
    spout, split = comp(t, "sentence-spout"), comp(t, "splitsentence")
    assert [(s.name, s.fields) for s in spout.outputs] == [("default", ("sentence",))]
    assert sorted((s.name, s.fields) for s in split.outputs) == [("default", ("word",)),
                                                                 ("lengths", ("word", "length"))]
    assert split.par == 2
    assert spout.config["rabbitmq.configfile"] == "etc/rabbit.yml"
    assert "publisher.data_paths" in split.config
    assert comp(t, "count").inputs[0].grouping.fields == ("word",)


def test_storm_shell_bolt_class_takes_the_command_only(tmp_path):
    shell_bolt = ('"org.apache.storm.task.ShellBolt"\n'
                  '    constructorArgs: [["python3", "x.py"]]\n'
                  '    configMethods:\n'
                  '      - {name: setDefaultStream, args: [["w"]]}')
    t = load(write(tmp_path, WORD_COUNT.replace('"org.apache.storm.testing.TestWordCounter"', shell_bolt)))
    assert [(s.name, s.fields) for s in comp(t, "count").outputs] == [("default", ("w",))]


def test_storm_example_file_loads():
    t = load(FLUX.parent.parent / "examples" / "storm" / "flux_word_count.yaml")
    assert [c.name for c in t.components] == ["sentence-spout", "splitsentence", "count", "log"]
