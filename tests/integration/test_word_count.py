"""Word count on the local scheduler: real processes, real sockets, exact counts."""

import time
from collections import Counter, defaultdict

import psutil
import pytest
import wc_common

from heron_py.compiled import extension_file
from heron_py.hotpath import MODULES
from heron_py.scheduler.local import LocalScheduler
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.integration

N = 3000


@pytest.mark.parametrize("containers", [2, 3])
def test_counts_equal_a_plain_python_count(heron_home, containers):
    expected = wc_common.expected_counts(N)
    total = sum(expected.values())
    run = run_local(EXAMPLES / "word_count.py", ["--sentences", str(N)], home=heron_home,
                    containers=containers, capture=["count"],
                    until=lambda r: len(r["count"]) >= total, timeout=90)
    words = [v[0] for v in run.values("count")]
    assert len(words) == total
    assert Counter(words) == expected
    # fields grouping: every word was counted by exactly one count task
    tasks_of = defaultdict(set)
    for r in run.received["count"]:
        tasks_of[r["values"][0]].add(r["task"])
    assert all(len(t) == 1 for t in tasks_of.values())
    assert len({t for ts in tasks_of.values() for t in ts}) == 2


def test_one_process_per_task_and_kill_leaves_nothing(heron_home):
    run = run_local(EXAMPLES / "word_count.py", ["--sentences", "100"], home=heron_home, containers=2,
                    keep_running=True)
    state = LocalFsStateManager(heron_home)
    topology_id = state.get_scheduler_location(run.name)["topology_id"]
    procs = LocalScheduler.topology_processes(topology_id)
    modules = Counter()
    for p in procs:
        cmd = p.cmdline()
        modules[cmd[cmd.index("-m") + 1]] += 1
    # 5 tasks (1 spout, 2 split, 2 count), 2 containers, each with a stream manager, a
    # metrics manager and the fork server its daemons were forked from; the topology's supervisor
    assert modules == {"instance": 5, "stream_manager": 2, "metrics_manager": 2, "topology_master": 1,
                       "heron_py.scheduler.executor": 2, "heron_py.scheduler.zygote": 2,
                       "heron_py.scheduler.supervisor": 1}
    # forked, yet each daemon's parent is its container's executor (a child subreaper)
    executors = {p.pid for p in procs if "heron_py.scheduler.executor" in p.cmdline()}
    daemons = [p for p in procs if {"instance", "stream_manager", "metrics_manager", "topology_master"}
               & set(p.cmdline())]
    assert len(daemons) == 10 and all(p.ppid() in executors for p in daemons)
    pids = [p.pid for p in procs]
    kill_local(heron_home, run.name)
    assert LocalScheduler.topology_processes(topology_id) == []
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in pids)
    assert state.get_topology(run.name) is None


def _cmd(p):
    try:
        return p.cmdline()
    except psutil.Error:  # gone (a killed task) or a zombie not yet reaped
        return []


def _ppid(p):
    try:
        return p.ppid()
    except psutil.Error:
        return None


def _modules(procs):
    out = Counter()
    for p in procs:
        cmd = p.cmdline()
        out[cmd[cmd.index("-m") + 1]] += 1
    return out


def test_without_the_fork_server_every_daemon_is_started_on_its_own(heron_home):
    expected = wc_common.expected_counts(500)
    run = run_local(EXAMPLES / "word_count.py", ["--sentences", "500"], home=heron_home, containers=2,
                    properties={"heron_py.executor.fork.server": "false"}, capture=["count"],
                    until=lambda r: len(r["count"]) >= sum(expected.values()), timeout=90, keep_running=True)
    state = LocalFsStateManager(heron_home)
    procs = LocalScheduler.topology_processes(state.get_scheduler_location(run.name)["topology_id"])
    assert _modules(procs) == {"instance": 5, "stream_manager": 2, "metrics_manager": 2, "topology_master": 1,
                               "heron_py.scheduler.executor": 2, "heron_py.scheduler.supervisor": 1}
    assert Counter(v[0] for v in run.values("count")) == expected
    kill_local(heron_home, run.name)


def test_a_killed_fork_server_is_replaced_when_a_task_restarts(heron_home):
    run = run_local(EXAMPLES / "word_count.py", [], home=heron_home, containers=2, keep_running=True)
    state = LocalFsStateManager(heron_home)
    topology_id = state.get_scheduler_location(run.name)["topology_id"]
    procs = LocalScheduler.topology_processes(topology_id)
    executors = {p.pid for p in procs if "heron_py.scheduler.executor" in p.cmdline()}
    # the zygote forked from the executor at its start, then killed with a task of its container
    split = next(p for p in procs if "instance" in p.cmdline() and "split" in p.cmdline())
    zygote = next(p for p in procs if "heron_py.scheduler.zygote" in p.cmdline() and p.ppid() == split.ppid())
    parent = split.ppid()
    zygote.kill()
    split.kill()
    deadline = time.monotonic() + 60
    again = []
    while time.monotonic() < deadline and not again:
        time.sleep(0.5)
        again = [p for p in LocalScheduler.topology_processes(topology_id)
                 if "instance" in _cmd(p) and "split" in _cmd(p) and p.pid != split.pid and _ppid(p) == parent]
    assert len(again) == 1, "the split task was not restarted"
    # forked by a new fork server, and still the executor's child
    assert parent in executors and again[0].ppid() == parent
    zygotes = [p for p in LocalScheduler.topology_processes(topology_id) if "heron_py.scheduler.zygote" in _cmd(p)]
    assert len(zygotes) == 2 and zygote.pid not in {p.pid for p in zygotes}
    kill_local(heron_home, run.name)
    assert LocalScheduler.topology_processes(topology_id) == []


def _mapped_files(pid):
    try:
        return {m.path for m in psutil.Process(pid).memory_maps()}
    except psutil.Error:
        return set()


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "HERON_PY_PURE=1"])
def test_the_daemons_run_the_compiled_hot_path_unless_told_to_run_its_source(heron_home, pure):
    """The extension modules installation built are what the tasks and stream managers run, and
    HERON_PY_PURE=1 in the submitter's environment makes every process of the topology run the
    .py files instead (same counts either way)."""
    built = {m: extension_file(m) for m in MODULES}
    built = {m: str(p) for m, p in built.items() if p is not None}
    if not built:
        pytest.skip("no hot-path module is compiled here: installed without a C compiler or with HERON_PY_PURE=1")
    expected = wc_common.expected_counts(500)
    # "" overrides a HERON_PY_PURE=1 of this test run's own environment (CI's pure-Python run)
    run = run_local(EXAMPLES / "word_count.py", ["--sentences", "500"], home=heron_home, containers=2,
                    capture=["count"], until=lambda r: len(r["count"]) >= sum(expected.values()), timeout=90,
                    keep_running=True, env={"HERON_PY_PURE": "1" if pure else ""})
    try:
        state = LocalFsStateManager(heron_home)
        procs = LocalScheduler.topology_processes(state.get_scheduler_location(run.name)["topology_id"])
        roles = {p.pid: (cmd := _cmd(p))[cmd.index("-m") + 1] for p in procs}
        mapped = {pid: _mapped_files(pid) & set(built.values()) for pid in roles}
        if pure:
            assert {pid: files for pid, files in mapped.items() if files} == {}
        else:
            for pid, role in roles.items():
                if role == "instance":
                    assert {built["instance.execution"], built["heron_py.runtime.emitter"]} <= mapped[pid], role
                elif role == "stream_manager":
                    assert {built["stream_manager.forwarder"], built["stream_manager.acking"],
                            built["heron_py.runtime.acking"]} <= mapped[pid], role
        assert Counter(v[0] for v in run.values("count")) == expected
    finally:
        kill_local(heron_home, run.name)
