"""heronpy Streamlet programs on the local scheduler (real processes): every operator family
(elements, windows, joins) in one program launched once for the module
(topologies/streamlet_families.py), the log() lines they write, and the programs heron-py
refuses at submit."""

import re
import subprocess
from pathlib import Path

import pytest

from heron_py.cli.submit import load_topology_file
from heron_py.common.container_layout import TopologyPaths
from tests.integration._shared_topology import running
from tests.support import run_cli, wait_for

pytestmark = pytest.mark.integration

TOPOLOGIES = Path(__file__).resolve().parent / "topologies"
HERON_MIRROR = Path("/work/.mirror/apache+incubator-heron/repo")


def _logs(home, name, component):
    logs = TopologyPaths.of(name, home).logs
    return "".join(f.read_text() for f in logs.glob(f"container-*/{component}-*.log"))


# the sinks of streamlet_families.py, by the names heronpy gives them (checked below); with
# fusion on (the default) the clone's consume runs in its repartition's task, one component
# named after both, which reads what the repartition read
ELEMENTS, CLONE, COUNTS, TOTALS, JOINED, OUTER = ("log-3", "repartition-3__consume-1", "log-1", "log-2", "log-4",
                                                  "log-5")
SINK_INPUTS = {ELEMENTS: "tagged", CLONE: "repartition-1", COUNTS: "counts", TOTALS: "total", JOINED: "joined",
               OUTER: "outer"}


def _elements_seen(rec):
    tagged = [v[0] for v in (r["values"] for r in rec["tagged"])]
    return {"a", "b", "c", "7!"} <= set(tagged) and any(r["values"][0] == "7!" for r in rec[CLONE])


def _windows_seen(rec):
    return len(rec[COUNTS]) >= 8 and len(rec[TOTALS]) >= 2


def _joins_seen(rec):
    joined = {r["values"][0][1] for r in rec[JOINED]}
    outer = {r["values"][0][1] for r in rec[OUTER]}
    return "ac" in joined and "None+e" in outer


@pytest.fixture(scope="module")
def families(tmp_path_factory):
    """One run of every operator family (streamlet_families.py), until each family's sinks hold
    what its test reads; killed at the module's end."""
    home = tmp_path_factory.mktemp("streamlets") / "heron-home"
    home.mkdir()
    with running(home, TOPOLOGIES / "streamlet_families.py", ["families"], name="families",
                 capture=["tagged", *SINK_INPUTS], timeout=90,
                 until=lambda r: _elements_seen(r) and _windows_seen(r) and _joins_seen(r)) as run:
        yield run


def test_the_families_program_names_its_sinks_as_the_tests_read_them():
    topo = load_topology_file(TOPOLOGIES / "streamlet_families.py", ["families"])
    assert {sink: [i.component for i in topo.component(sink).inputs] for sink in SINK_INPUTS} == {
        sink: [source] for sink, source in SINK_INPUTS.items()}


def test_element_operators(families):
    run, home = families, families.home
    wait_for(lambda: re.search(r"INFO.*\b[abc7!]+@[01]\b", _logs(home, run.name, ELEMENTS)), 30,
             "log() lines of the tagged elements")
    tags = {v[0] for v in run.values(ELEMENTS)}
    assert tags <= {f"{w}@{p}" for w in ("a", "b", "c", "7!") for p in (0, 1)}
    assert "Traceback" not in _logs(home, run.name, "*")


def test_windowed_reduces(families):
    run, home = families, families.home
    # a captured (KeyedWindow, count) is [its repr, count] in the JSON capture
    counts = [v[0] for v in run.values(COUNTS)]
    assert all(re.fullmatch(r"KeyedWindow \{key: \w+, window: Window \{start_time: \d+, end_time: \d+\}\}", kw)
               and n >= 1 for kw, n in counts), counts[:3]
    assert {re.search(r"key: (\w+)", kw).group(1) for kw, _ in counts} <= {
        "Mary", "Had", "a", "little", "lamb", "I", "Love", "You"}
    totals = [v[0] for v in run.values(TOTALS)]
    assert all(re.fullmatch(r"Window \{start_time: \d+, end_time: \d+\}", w) and n >= 1 for w, n in totals)
    wait_for(lambda: "KeyedWindow {key: " in _logs(home, run.name, COUNTS), 20, "log() of the counts")


def test_join_and_outer_join(families):
    joined = {(re.search(r"key: (\w+)", kw).group(1), v) for kw, v in (x[0] for x in families.values(JOINED))}
    assert joined <= {("key1", x + y) for x in "ab" for y in "cd"}


def test_effectively_once_streamlet_program_is_accepted(heron_home):
    proc = run_cli(heron_home, "submit", "local", "--dry-run", str(TOPOLOGIES / "streamlet_refused.py"), "eo", "eo")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("topology 'eo' (dry run: nothing stored, nothing launched)")


@pytest.mark.parametrize(("mode", "expected"), [
    ("pulsar", "heron-py: error: PulsarStreamlet.pulsarStreamlet: Pulsar connector is not supported by heron-py: "),
])
def test_refused_at_submit_with_one_error(heron_home, mode, expected):
    proc = run_cli(heron_home, "submit", "local", str(TOPOLOGIES / "streamlet_refused.py"), "refused", mode)
    assert proc.returncode == 1
    assert proc.stderr.startswith(expected) and proc.stderr.count("\n") == 1, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(not HERON_MIRROR.is_dir(), reason="Heron's repository mirror is not on this machine")
@pytest.mark.parametrize("example", ["word_count_streamlet.py", "join_streamlet_topology.py"])
def test_herons_own_streamlet_examples_build_unchanged(heron_home, tmp_path, example):
    source = subprocess.run(["git", "-C", str(HERON_MIRROR), "show", f"HEAD:examples/src/python/{example}"],
                            capture_output=True, check=True).stdout
    (tmp_path / example).write_bytes(source)
    proc = run_cli(heron_home, "submit", "local", "--dry-run", str(tmp_path / example), "example")
    assert proc.returncode == 0, proc.stderr
    assert "log-1" in proc.stdout
