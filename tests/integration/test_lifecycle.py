"""``heron-py restart`` and ``heron-py update`` on a running topology (real processes)."""

import math
import time
from collections import Counter, defaultdict

import psutil
import pytest
import wc_common

from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from heron_py.testing.local import read_capture
from tests.conftest import EXAMPLES
from tests.support import run_cli as _cli
from tests.support import wait_for as _wait

pytestmark = pytest.mark.integration

RATE = 300.0






def _rows(home, name):
    return read_capture(home / "capture" / name, ["count"])["count"]


def _start(home, name):
    return run_local(EXAMPLES / "paced_word_count.py", ["--rate", str(RATE)], home=home, name=name,
                     capture=["count"], keep_running=True, until=lambda r: len(r["count"]) > 300)


def test_update_parallelism_keeps_exact_counts(heron_home):
    """A live rescale: the added task starts, every other process keeps running, and routing
    switches at a drain point, so each word after the update is counted once by one task."""
    name = "pwc_update"
    _start(heron_home, name)
    state = LocalFsStateManager(heron_home)
    epoch = float(state.get_topology(name).component("sentence").config["wc.epoch"])
    pids = {t: i["pid"] for t, i in state.get_execution_state(name)["instances"].items()}

    proc = _cli(heron_home, "update", "local", name, "--component-parallelism", "split:3")
    assert proc.returncode == 0, proc.stderr
    done = time.time()
    assert proc.stdout == (f"topology '{name}' updated: split 2 -> 3 (live: 5 tasks kept running, 1 started, "
                           "0 stopped; 2 containers); every task is running again\n")
    es = state.get_execution_state(name)
    assert sorted(i["component"] for i in es["instances"].values()) == [
        "count", "count", "sentence", "split", "split", "split"]
    assert {t: es["instances"][t]["pid"] for t in pids} == pids  # no process of the old plan restarted
    assert set(es["instances"]) - set(pids) == {"6"}  # the new task: a new id

    # the sentences due after the update completed: every word counted exactly once, each word
    # by one count task only (fields grouping agrees across all senders)
    first = math.ceil((done - epoch) * RATE) + 1
    last = first + 1500
    _wait(lambda: any(r["values"][1] > last + 300 for r in _rows(heron_home, name)), 60,
          "the spout to get well past the checked range")
    time.sleep(1.0)
    rows = [r for r in _rows(heron_home, name) if first <= r["values"][1] <= last]
    keys = Counter((r["values"][1], r["values"][2]) for r in rows)
    assert len(keys) == sum(len(wc_common.sentence(s).split()) for s in range(first, last + 1))
    assert set(keys.values()) == {1}
    expected = Counter(w for s in range(first, last + 1) for w in wc_common.sentence(s).split())
    assert Counter(r["values"][0] for r in rows) == expected
    tasks_of_word = defaultdict(set)
    for r in rows:
        tasks_of_word[r["values"][0]].add(r["task"])
    assert all(len(t) == 1 for t in tasks_of_word.values())
    split_tasks = {t for t, i in es["instances"].items() if i["component"] == "split"}
    assert {str(r["source_task"]) for r in rows} == split_tasks  # all three split tasks worked

    # and back: the removed task's process stops, the others keep theirs
    proc = _cli(heron_home, "update", "local", name, "--component-parallelism", "split:2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (f"topology '{name}' updated: split 3 -> 2 (live: 5 tasks kept running, 0 started, "
                           "1 stopped; 2 containers); every task is running again\n")
    removed = es["instances"]["6"]["pid"]
    _wait(lambda: not psutil.pid_exists(removed) or psutil.Process(removed).status() == psutil.STATUS_ZOMBIE, 20,
          "the removed task's process to stop")
    after = state.get_execution_state(name)["instances"]
    assert {t: after[t]["pid"] for t in pids} == pids
    n = len(_rows(heron_home, name))
    _wait(lambda: len(_rows(heron_home, name)) > n + 300, 30, "output after the second update")


def test_restart_one_container_and_errors(heron_home):
    name = "pwc_restart"
    _start(heron_home, name)
    state = LocalFsStateManager(heron_home)
    before = state.get_execution_state(name)["instances"]
    proc = _cli(heron_home, "restart", "local", name, "--container", "1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == f"topology '{name}': restarted container 1; every task is running again\n"
    after = state.get_execution_state(name)["instances"]
    for t, i in before.items():
        changed = after[t]["pid"] != i["pid"]
        assert changed == (i["container"] == 1), (t, i, after[t])
    n = len(_rows(heron_home, name))
    _wait(lambda: len(_rows(heron_home, name)) > n + 300, 30, "output after the restart")

    proc = _cli(heron_home, "restart", "local", name, "--container", "7")
    assert (proc.returncode, proc.stderr) == (
        1, f"heron-py: error: restart: topology '{name}' has no container 7; expected 0..1\n")
    proc = _cli(heron_home, "update", "local", name, "--component-parallelism", "splt:3")
    assert (proc.returncode, proc.stderr) == (
        1, f"heron-py: error: update: topology '{name}' has no component 'splt'; expected one of "
        "sentence, split, count\n")
    proc = _cli(heron_home, "update", "local", name, "--component-parallelism", "split:0")
    assert (proc.returncode, proc.stderr) == (
        1, "heron-py: error: --component-parallelism: expected COMPONENT:N with N an integer >= 1, "
        "found 'split:0'\n")


def test_a_task_dead_of_a_native_crash_leaves_its_python_stacks_in_its_log(heron_home):
    """SIGSEGV, as a C extension's crash delivers it: faulthandler writes every thread's Python
    stack to the task's log, and the executor starts the task again."""
    import os
    import signal

    from heron_py.common.container_layout import TopologyPaths
    from tests.connector_support import task_pids

    name = "pwc_segv"
    _start(heron_home, name)
    task, pid = min(task_pids(heron_home, name, "count").items())
    os.kill(pid, signal.SIGSEGV)
    logs = TopologyPaths.of(name, heron_home).logs
    _wait(lambda: task_pids(heron_home, name, "count").get(task, pid) != pid, 30, "the count task started again")
    text = "".join(f.read_text(errors="replace") for f in logs.glob(f"container-*/count-{task}.log"))
    assert "Fatal Python error: Segmentation fault" in text
    assert "Current thread" in text and "Thread 0x" in text  # the stacks of its two threads at least
    executor = "".join(f.read_text(errors="replace") for f in logs.glob("executor-*.log"))
    assert f"count-{task} exited with code -11" in executor


def _stream_managers(name):
    """The topology's stream manager processes (their command lines name it)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if "stream_manager" in cmd and "--topology" in cmd and cmd[cmd.index("--topology") + 1] == name:
            found.append(p)
    return found


def test_a_second_update_during_a_live_rescale_is_refused_in_one_line_and_the_first_ends_stored(heron_home):
    """Two updates at once: the master takes one rescale at a time and refuses the other in one
    line, and the refused one's put-back leaves the first's documents (which it read). The first
    is held in staging for sure: its added task cannot register while the stream managers are
    stopped (SIGSTOP, for a few seconds: under their liveness limits), and goes on once they are
    resumed. At the end the stored definition and packing are what runs. (A refused update whose
    documents another wrote over meanwhile is tests/unit/cli/test_lifecycle.py's; the master's
    storing of what it switched to, tests/unit/topology_master/test_definition_switched.py's.)"""
    import os
    import signal
    import subprocess
    import sys

    name = "pwc_two_updates"
    _start(heron_home, name)
    state = LocalFsStateManager(heron_home)
    stmgrs = _stream_managers(name)
    assert len(stmgrs) == 2, stmgrs
    first = None
    try:
        for p in stmgrs:
            p.send_signal(signal.SIGSTOP)
        first = subprocess.Popen([sys.executable, "-m", "heron_py.cli.main", "update", "local", name,
                                  "--component-parallelism", "split:3"], text=True, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env={**os.environ, "HERON_PY_HOME": str(heron_home)})
        _wait(lambda: (state.get_execution_state(name) or {}).get("rescale"), 30, "the first rescale under way")
        second = _cli(heron_home, "update", "local", name, "--component-parallelism", "count:3")
        assert second.returncode == 1
        assert second.stderr == (f"heron-py: error: update: topology '{name}': rescale: a rescale is already under "
                                 f"way (staging); wait for it to finish\n")
    finally:
        for p in stmgrs:
            p.send_signal(signal.SIGCONT)
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    assert "split 2 -> 3 (live: " in out
    running = state.get_physical_plan(name)
    assert sorted(t.component for t in running.packing.tasks).count("split") == 3
    assert state.get_packing_plan(name) == running.packing
    topo = state.get_topology(name)
    assert topo.component("split").par == 3 and topo.component("count").par == 2
