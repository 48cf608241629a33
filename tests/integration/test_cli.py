"""The CLI as a user drives it: submit, list, status, deactivate/activate, logs, kill."""

import json
import os
import subprocess
import sys
import time

import pytest

from tests.conftest import EXAMPLES

pytestmark = pytest.mark.integration


def cli(home, *args, check=True):
    env = dict(os.environ, HERON_PY_HOME=str(home))
    p = subprocess.run([sys.executable, "-m", "heron_py.cli.main", *args], env=env, text=True,
                       capture_output=True, timeout=120)
    if check and p.returncode != 0:
        raise AssertionError(f"heron-py {' '.join(args)} failed: {p.stdout}\n{p.stderr}")
    return p


def _count(home):
    # bytes captured so far: cheap to read however long the run (parsing would not be)
    return sum(f.stat().st_size for f in (home / "capture").glob("count-*.jsonl"))


def _wait_growth(home, timeout=20):
    start = _count(home)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.3)
        if _count(home) > start:
            return True
    return False


def test_submit_status_deactivate_activate_logs_kill(heron_home):
    out = cli(heron_home, "submit", "local", "--name", "wc", "--containers", "2",
              "--config-property", f"heron_py.testing.capture.dir={heron_home / 'capture'}",
              "--config-property", "heron_py.testing.capture.components=count",
              # low watermarks keep the backlog (and the drain after deactivate) short
              "--config-property", "heron.streammgr.network.backpressure.highwatermark.mb=2",
              "--config-property", "heron.streammgr.network.backpressure.lowwatermark.mb=1",
              "--config-property", "heron_py.instance.inbound.queue.batches=4",
              "--config-property", "heron_py.instance.outbound.queue.batches=4",
              "--config-property", "heron_py.instance.batch.size=256",
              # the spout paced (its output rate limit, a tenth of its pace here): the test needs
              # tuples moving, not many; fast enough that the drain after deactivate never
              # pauses for 1.5 s (one socket read past the limit, ~256 KB, waits 0.26 s)
              str(EXAMPLES / "word_count.py"), "--spout-output-bps", "1000000")
    assert out.stdout.startswith("topology 'wc' is running: 5 tasks in 2 containers")
    assert cli(heron_home, "list", "local").stdout.split() == ["wc"]

    status = json.loads(cli(heron_home, "status", "local", "wc", "--json").stdout)
    assert status["state"] == "RUNNING" and status["tmanager_reachable"]
    assert len(status["instances"]) == 5 and all(i["ready"] and i["pid"] > 0 for i in status["instances"].values())
    assert sorted(status["stmgrs"]) == ["0", "1"]
    assert "task  component" in cli(heron_home, "status", "local", "wc").stdout

    assert _wait_growth(heron_home)
    assert cli(heron_home, "deactivate", "local", "wc").stdout.strip() == (
        "topology 'wc' is now PAUSED; applied on every stream manager")
    # what is in flight drains (bounded by the queues and watermarks), then nothing moves
    # (generous: on a loaded CI machine the capturing count bolt drains slowly)
    deadline = time.monotonic() + 90
    while _wait_growth(heron_home, timeout=1.5):
        assert time.monotonic() < deadline, "tuples kept flowing 90 s after deactivate"
    # then 3 s in which nothing moves; the CLI checks that do not depend on the flow (status,
    # logs, a second submit) run inside those 3 s instead of after them (the count only grows, so
    # comparing it at both ends proves what polling it did)
    quiet_from, quiet_until = _count(heron_home), time.monotonic() + 3
    assert json.loads(cli(heron_home, "status", "local", "wc", "--json").stdout)["state"] == "PAUSED"

    logs = cli(heron_home, "logs", "local", "wc", "count").stdout
    assert "==> container-" in logs and "counted" in logs
    assert "split" not in logs.split("<==")[0]

    # a second submit under the same name is refused with one clear error
    again = cli(heron_home, "submit", "local", "--name", "wc", str(EXAMPLES / "word_count.py"), check=False)
    assert again.returncode == 1
    assert again.stderr.strip() == ("heron-py: error: topology 'wc' is already running; kill it first "
                                    "(heron-py kill local wc)")
    time.sleep(max(0.0, quiet_until - time.monotonic()))
    assert _count(heron_home) == quiet_from, "tuples kept flowing after deactivate"

    assert cli(heron_home, "activate", "local", "wc").stdout.strip() == (
        "topology 'wc' is now RUNNING; applied on every stream manager")
    assert _wait_growth(heron_home)

    assert cli(heron_home, "kill", "local", "wc").stdout.startswith("topology 'wc' killed")
    assert cli(heron_home, "list", "local").stdout.strip() == ""
    gone = cli(heron_home, "status", "local", "wc", check=False)
    assert gone.returncode == 1
    assert gone.stderr.strip() == ("heron-py: error: topology 'wc' is not running "
                                   "(heron-py list local shows what is)")


@pytest.mark.parametrize("prop, error", [
    ("topology.message.timeout.secs=soon",
     "topology 'word_count': config topology.message.timeout.secs: expected a number of seconds > 0, found 'soon'"),
    ("heron.streammgr.network.backpressure.lowwatermark.mb=200",
     "topology 'word_count': config heron.streammgr.network.backpressure.lowwatermark.mb (200) must be below "
     "heron.streammgr.network.backpressure.highwatermark.mb (16)"),
])
def test_a_bad_engine_config_value_is_one_error_at_submit(heron_home, prop, error):
    p = cli(heron_home, "submit", "local", "--config-property", prop, str(EXAMPLES / "word_count.py"), check=False)
    assert (p.returncode, p.stderr) == (1, f"heron-py: error: {error}\n")
    # nothing was started or stored
    assert cli(heron_home, "list", "local").stdout == ""


def test_submit_slurm_refusals_before_anything_is_stored(heron_home):
    p = cli(heron_home, "submit", "slurm", str(EXAMPLES / "word_count.py"), check=False)
    assert (p.returncode, p.stderr) == (1, "heron-py: error: submit slurm: the localfs state manager keeps the "
                                           "topology's state on this machine only, where the slurm nodes cannot "
                                           "read it; expected --state-manager zookeeper --zk HOST:PORT\n")
    env = dict(os.environ, HERON_PY_HOME=str(heron_home), PATH="/nonexistent")
    p = subprocess.run([sys.executable, "-m", "heron_py.cli.main", "submit", "slurm", "--state-manager", "zookeeper",
                        "--zk", "127.0.0.1:1", str(EXAMPLES / "word_count.py")], env=env, text=True,
                       capture_output=True, timeout=60)
    assert (p.returncode, p.stderr) == (1, "heron-py: error: slurm scheduler: sbatch not found on PATH; expected "
                                           "Slurm's client commands (Debian: apt-get install slurm-client) on the "
                                           "machine that runs heron-py\n")
    assert not (heron_home / "topologies").exists()


PLANS = (
    "topology 'word_count' (dry run: nothing stored, nothing launched)\n"
    "components:\n"
    "  sentence (spout __main__:SentenceSpout, par 1) outputs: default[sentence]\n"
    "  split (bolt __main__:SplitBolt, par 2) inputs: sentence/default shuffle; outputs: default[word]\n"
    "  count (bolt __main__:CountBolt, par 2) inputs: split/default fields(word); outputs: default[word, count]\n"
    "packing: 5 tasks in 2 containers\n"
    "  container 0: sentence-1, split-3, count-5\n"
    "  container 1: split-2, count-4\n")


@pytest.mark.parametrize("argv", [
    ["local", "--dry-run", "--containers", "2", "{f}"],
    # Heron's habit: heron-py's options after the file are heron-py's, not the topology's
    ["local", "{f}", "--dry-run", "--containers", "2"],
    ["local/alice/devel", "{f}", "--containers=2", "--dry-run"],
])
def test_submit_dry_run_prints_the_plans_and_launches_nothing(heron_home, argv):
    import re

    p = cli(heron_home, "submit", *[a.format(f=EXAMPLES / "word_count.py") for a in argv])
    assert p.stdout.startswith(PLANS)
    assert re.fullmatch(r"package: 3 files, [0-9.]+ KB \([0-9.]+ KB zipped\)\n", p.stdout[len(PLANS):])
    assert cli(heron_home, "list", "local").stdout == ""
    assert not (heron_home / "topologies").exists()
    bad = cli(heron_home, "submit", "local", "--dry-run", "--config-property", "topology.message.timeout.secs=0",
              str(EXAMPLES / "word_count.py"), check=False)
    assert (bad.returncode, bad.stderr) == (1, "heron-py: error: topology 'word_count': config "
                                               "topology.message.timeout.secs: expected a number of seconds > 0, "
                                               "found '0'\n")


@pytest.mark.parametrize("code, error", [
    ('import pulsar\n', "ModuleNotFoundError: No module named 'pulsar' (at {f}:1: import pulsar)"),
    ('x = {}\n\n\ndef build():\n    return x["spout"]\n\n\nbuild()\n',
     "KeyError: 'spout' (at {f}:5: return x[\"spout\"])"),
])
def test_a_topology_file_that_raises_is_one_error_naming_where(heron_home, tmp_path, code, error):
    f = tmp_path / "topo.py"
    f.write_text(code)
    p = cli(heron_home, "submit", "local", str(f), check=False)
    message = "failed while building its topology: " + error.format(f=f)
    assert (p.returncode, p.stderr) == (1, f"heron-py: error: {f} {message}\n")
    assert cli(heron_home, "list", "local").stdout == ""


def test_deploy_deactivated_then_restart_one_container_by_position_then_activate(heron_home):
    out = cli(heron_home, "submit", "local", str(EXAMPLES / "word_count.py"), "--name", "wcd", "--containers", "2",
              "--deploy-deactivated",
              "--config-property", f"heron_py.testing.capture.dir={heron_home / 'capture'}",
              "--config-property", "heron_py.testing.capture.components=count",
              "--spout-output-bps", "100000")
    try:
        assert out.stdout.startswith("topology 'wcd' is deployed deactivated (heron-py activate starts its spouts): "
                                     "5 tasks in 2 containers")
        assert json.loads(cli(heron_home, "status", "local", "wcd", "--json").stdout)["state"] == "PAUSED"
        time.sleep(1.5)
        assert _count(heron_home) == 0  # the spouts never ran
        # Heron's form: the container as a positional
        assert cli(heron_home, "restart", "local", "wcd", "1").stdout == (
            "topology 'wcd': restarted container 1; every task is running again\n")
        assert json.loads(cli(heron_home, "status", "local", "wcd", "--json").stdout)["state"] == "PAUSED"
        cli(heron_home, "activate", "local", "wcd", "--verbose")
        assert _wait_growth(heron_home)
    finally:
        cli(heron_home, "kill", "local", "wcd", check=False)


def test_config_warnings_at_submit_name_the_likely_key(heron_home):
    p = cli(heron_home, "submit", "local", str(EXAMPLES / "word_count.py"), "--dry-run",
            "--config-property", "topology.mesage.timeout.secs=5",
            "--config-property", "topology.worker.childopts=-Xmx1g")
    assert p.stderr == (
        "heron-py: warning: unknown config key 'topology.mesage.timeout.secs'; did you mean "
        "'topology.message.timeout.secs'?\n"
        "heron-py: warning: config keys accepted for Storm/Heron compatibility but not used by heron-py: "
        "topology.worker.childopts\n")
