"""The command line as Heron and Storm users write it (issue 36): heron-py's options anywhere,
``--`` for the topology, cluster/role/env, help lines and examples, config warnings, and one
clear error for a file that is not a topology."""

import argparse
import subprocess
import sys
import textwrap

import pytest

from heron_py.cli.argv import split_topology_args
from heron_py.cli.config_check import key_warnings
from heron_py.cli.main import build_parser, parse_args
from heron_py.cli.spark_cmds import JAVA_MISSING, java_available
from heron_py.cli.submit import SubmitError, load_topology_file, prepare
from heron_py.planner.model import TopologyDef


@pytest.mark.parametrize("words, own, topo", [
    (["local", "wc.py", "--dry-run"], ["local", "wc.py", "--dry-run"], []),
    (["local", "wc.py", "--rate", "5", "--name", "x"], ["local", "wc.py", "--name", "x"], ["--rate", "5"]),
    (["local", "wc.py", "--name=x", "a", "-3"], ["local", "wc.py", "--name=x"], ["a", "-3"]),
    (["--dry-run", "local", "wc.py", "a"], ["--dry-run", "local", "wc.py"], ["a"]),
    (["local", "wc.py", "--", "--name", "x", "--dry-run"], ["local", "wc.py"], ["--name", "x", "--dry-run"]),
    (["local", "wc.py", "a", "--", "--"], ["local", "wc.py"], ["a", "--"]),
])
def test_split_topology_args(words, own, topo):
    arities = {"--dry-run": 0, "--name": 1, "-h": 0}
    assert split_topology_args(words, arities, 2) == (own, topo)


def test_a_dry_run_flag_after_the_file_is_heron_pys():
    args = parse_args(["submit", "local", "wc.py", "--dry-run", "--rate", "5"])
    assert (args.dry_run, args.file, args.args) == (True, "wc.py", ["--rate", "5"])
    args = parse_args(["submit", "local", "wc.py", "--", "--dry-run"])
    assert (args.dry_run, args.args) == (False, ["--dry-run"])
    args = parse_args(["submit", "local", "wc.py", "myname", "--containers", "3", "--verbose"])
    assert (args.containers, args.args, args.verbose) == (3, ["myname"], True)
    args = parse_args(["--verbose", "run", "wc.py", "x"])
    assert (args.verbose, args.args) == (True, ["x"])


def test_herons_forms():
    assert parse_args(["submit", "local/alice/devel", "wc.py"]).cluster == "local"
    assert parse_args(["restart", "local", "wc", "0"]).container_pos == 0
    assert parse_args(["submit", "local", "wc.py", "--deploy-deactivated"]).deploy_deactivated


def test_a_bad_cluster_is_one_usage_error():
    p = subprocess.run([sys.executable, "-m", "heron_py.cli.main", "submit", "mars/a/b/c", "wc.py"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert p.stderr.splitlines()[-1] == ("heron-py submit: error: argument CLUSTER: 'mars/a/b/c': expected CLUSTER or "
                                         "CLUSTER/ROLE/ENV, e.g. local or local/alice/devel")


def test_version_flag():
    p = subprocess.run([sys.executable, "-m", "heron_py.cli.main", "--version"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0 and p.stdout.startswith("heron-py ") and "(Python 3." in p.stdout


def _verbs(ap: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for a in ap._actions:
        if isinstance(a, argparse._SubParsersAction):
            return dict(a.choices)
    raise AssertionError("no verbs")


def test_every_argument_has_help_and_every_verb_ends_with_examples():
    ap = build_parser()
    verbs = _verbs(ap)
    assert {"submit", "run", "init", "restart", "batch", "logs"} <= set(verbs)
    missing = [f"{verb} {a.dest}" for verb, p in verbs.items() for a in p._actions
               if not a.help or (a.help == argparse.SUPPRESS and a.dest != "help")]
    assert missing == []
    no_examples = [verb for verb, p in verbs.items() if not (p.epilog or "").startswith("examples:\n  heron-py ")]
    assert no_examples == []
    text = verbs["submit"].format_help()
    assert "every other word after FILE goes to the topology as its sys.argv[1:]" in text
    assert text.rstrip().splitlines()[-1].startswith("  heron-py submit ")


def test_config_key_warnings():
    assert key_warnings(["topology.mesage.timeout.secs", "topology.worker.childopts", "topology.container.ram",
                         "wordcount.rate", "heron_py.instance.batch.size", "topology.nonsense.entirely"]) == [
        "unknown config key 'topology.mesage.timeout.secs'; did you mean 'topology.message.timeout.secs'?",
        "unknown config key 'topology.nonsense.entirely'; heron-py does not read it",
        "config keys accepted for Storm/Heron compatibility but not used by heron-py: topology.container.ram, "
        "topology.worker.childopts",
    ]


def test_topology_workers_sets_the_containers_of_a_heronpy_topology(tmp_path):
    f = tmp_path / "t.py"
    f.write_text(textwrap.dedent('''
        from heronpy.api.bolt.bolt import Bolt
        from heronpy.api.spout.spout import Spout
        from heronpy.api.topology import TopologyBuilder

        class S(Spout):
            outputs = ["x"]

        class B(Bolt):
            outputs = []

        b = TopologyBuilder("workers")
        b.add_bolt("b", B, par=2, inputs=[b.add_spout("s", S, par=1)])
        b.set_config({"topology.workers": 3})
        b.build_and_submit()
    '''))
    topo = load_topology_file(f, [])
    assert isinstance(topo, TopologyDef)
    assert prepare(topo, name=None, containers=None, properties={})[1] == 3
    assert prepare(topo, name=None, containers=None, properties={"topology.stmgrs": "2"})[1] == 2
    assert prepare(topo, name=None, containers=1, properties={})[1] == 1


def test_a_syntax_error_is_reported_at_the_users_file_line_and_column(tmp_path):
    f = tmp_path / "broken.py"
    f.write_text("import sys\n\nx = (1,\n    y = 2 +\n")
    with pytest.raises(SubmitError) as e:
        load_topology_file(f, [])
    assert str(e.value) == f"{f}:3:5: SyntaxError: '(' was never closed\n    x = (1,\n        ^"
    (tmp_path / "helper.py").write_text("def f(:\n    pass\n")
    g = tmp_path / "uses_helper.py"
    g.write_text("import helper\n")
    with pytest.raises(SubmitError) as e:
        load_topology_file(g, [])
    assert str(e.value) == f"{tmp_path / 'helper.py'}:1:7: SyntaxError: invalid syntax\n    def f(:\n          ^"


def test_a_directory_or_a_non_python_file_is_one_error(tmp_path):
    kinds = "a Python file (.py) or a Flux file (.yaml, .yml)"
    with pytest.raises(SubmitError) as e:
        load_topology_file(tmp_path, [])
    assert str(e.value) == (f"topology file {tmp_path} is a directory without a __main__.py; expected {kinds}, or "
                            f"a Python package folder holding __main__.py (e.g. {tmp_path / 'topology.py'})")
    (tmp_path / "conf.json").write_text("{}")
    with pytest.raises(SubmitError) as e:
        load_topology_file(tmp_path / "conf.json", [])
    assert str(e.value) == f"topology file {tmp_path / 'conf.json'} is a .json file; expected {kinds}"
    with pytest.raises(SubmitError) as e:
        load_topology_file(tmp_path / "nope.py", [])
    assert str(e.value) == f"topology file {tmp_path / 'nope.py'} does not exist; expected {kinds}"


def test_batch_without_java_is_one_line(tmp_path):
    assert not java_available({"PATH": str(tmp_path)})
    (tmp_path / "jdk" / "bin").mkdir(parents=True)
    (tmp_path / "jdk" / "bin" / "java").write_text("")
    assert java_available({"PATH": "", "JAVA_HOME": str(tmp_path / "jdk")})
    assert "\n" not in JAVA_MISSING
    assert JAVA_MISSING == ("heron-py batch and reconcile run on PySpark, which needs Java 17 or later: install a "
                            "JRE (e.g. apt-get install openjdk-17-jre-headless, brew install openjdk@17) or set "
                            "JAVA_HOME; found no java on PATH and no JAVA_HOME")


def test_storms_rebalance_and_herons_comma_list_are_updates():
    from heron_py.cli.lifecycle import parse_parallelism
    from heron_py.cli.rebalance import cmd_rebalance

    args = parse_args(["rebalance", "wc", "-e", "count=4", "--executor", "split=2", "-w", "3"])
    assert (args.fn, args.cluster, args.name, args.wait_time) == (cmd_rebalance, "local", "wc", 3.0)
    assert parse_parallelism(args.component_parallelism) == {"count": 4, "split": 2}
    args = parse_args(["update", "local", "wc", "--component-parallelism", "count:4,split:2"])
    assert parse_parallelism(args.component_parallelism) == {"count": 4, "split": 2}
    with pytest.raises(SubmitError) as e:
        parse_parallelism(parse_args(["rebalance", "wc", "-e", "count"]).component_parallelism)
    assert str(e.value) == ("--component-parallelism: expected COMPONENT:N with N an integer >= 1, found 'count'")


def test_update_takes_a_drain_limit_in_seconds_and_refuses_anything_else(capsys):
    args = parse_args(["update", "local", "wc", "--component-parallelism", "count:3", "--drain-secs", "0.5"])
    assert args.drain_secs == 0.5
    assert parse_args(["update", "local", "wc", "--component-parallelism", "count:3"]).drain_secs is None
    with pytest.raises(SystemExit):
        parse_args(["update", "local", "wc", "--component-parallelism", "count:3", "--drain-secs", "0"])
    assert capsys.readouterr().err.splitlines()[-1] == (
        "heron-py update: error: argument --drain-secs: expected a number of seconds > 0, found '0'")
