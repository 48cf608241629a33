"""heronpy Streamlet programs on the local scheduler (real processes): one run per operator
family, the log() lines they write, and the programs heron-py refuses at submit."""

import re
import subprocess
from pathlib import Path

import pytest

from heron_py.scheduler.paths import TopologyPaths
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.support import run_cli, wait_for

pytestmark = pytest.mark.integration

TOPOLOGIES = Path(__file__).resolve().parent / "topologies"
HERON_MIRROR = Path("/work/.mirror/apache+incubator-heron/repo")


def _logs(home, name, component):
    logs = TopologyPaths.of(name, home).logs
    return "".join(f.read_text() for f in logs.glob(f"container-*/{component}-*.log"))


def test_element_operators(heron_home):
    def enough(rec):
        tagged = [v[0] for v in (r["values"] for r in rec["tagged"])]
        return {"a", "b", "c", "7!"} <= set(tagged) and any(r["values"][0] == "7!" for r in rec["consume-1"])

    run = run_local(TOPOLOGIES / "streamlet_elements.py", ["elements"], home=heron_home,
                    capture=["tagged", "consume-1", "log-1"], until=enough, timeout=60, keep_running=True)
    try:
        wait_for(lambda: re.search(r"INFO.*\b[abc7!]+@[01]\b", _logs(heron_home, run.name, "log-1")), 30,
                 "log() lines of the tagged elements")
        tags = {v[0] for v in run.values("log-1")}
        assert tags <= {f"{w}@{p}" for w in ("a", "b", "c", "7!") for p in (0, 1)}
        assert "Traceback" not in _logs(heron_home, run.name, "*")
    finally:
        kill_local(heron_home, run.name)


def test_windowed_reduces(heron_home):
    def enough(rec):
        return len(rec["log-1"]) >= 8 and len(rec["log-2"]) >= 2

    run = run_local(TOPOLOGIES / "streamlet_windows.py", ["windows"], home=heron_home,
                    capture=["log-1", "log-2"], until=enough, timeout=60, keep_running=True)
    try:
        # a captured (KeyedWindow, count) is [its repr, count] in the JSON capture
        counts = [v[0] for v in run.values("log-1")]
        assert all(re.fullmatch(r"KeyedWindow \{key: \w+, window: Window \{start_time: \d+, end_time: \d+\}\}", kw)
                   and n >= 1 for kw, n in counts), counts[:3]
        assert {re.search(r"key: (\w+)", kw).group(1) for kw, _ in counts} <= {
            "Mary", "Had", "a", "little", "lamb", "I", "Love", "You"}
        totals = [v[0] for v in run.values("log-2")]
        assert all(re.fullmatch(r"Window \{start_time: \d+, end_time: \d+\}", w) and n >= 1 for w, n in totals)
        wait_for(lambda: "KeyedWindow {key: " in _logs(heron_home, run.name, "log-1"), 20, "log() of the counts")
    finally:
        kill_local(heron_home, run.name)


def test_join_and_outer_join(heron_home):
    def enough(rec):
        joined = {r["values"][0][1] for r in rec["log-1"]}
        outer = {r["values"][0][1] for r in rec["log-2"]}
        return "ac" in joined and "None+e" in outer

    run = run_local(TOPOLOGIES / "streamlet_join.py", ["join"], home=heron_home,
                    capture=["log-1", "log-2"], until=enough, timeout=60)
    joined = {(re.search(r"key: (\w+)", kw).group(1), v) for kw, v in (x[0] for x in run.values("log-1"))}
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
