"""Word count on the local scheduler: real processes, real sockets, exact counts.

One 2-container word count runs for the module (``shared_wc``, in the mode of the pytest
process's own environment: CI runs this file under HERON_PY_PURE=1 too): the tests that only
read it share it, and the module's last test kills a task and its fork server, then the
topology. A launch-time option (3 containers, no fork server, the other hot-path mode) keeps
its own launch."""

import time
from collections import Counter, defaultdict
from contextlib import nullcontext

import psutil
import pytest
import wc_common

from heron_py.compiled import extension_file
from heron_py.hotpath import MODULES, pure_requested
from heron_py.scheduler.local import LocalScheduler
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES
from tests.integration._shared_topology import running

pytestmark = pytest.mark.integration

N = 3000
EXPECTED = wc_common.expected_counts(N)


@pytest.fixture(scope="module")
def shared_wc(tmp_path_factory):
    """The module's word count: 2 containers, N sentences, every count captured; the pytest
    process's environment decides its hot-path mode (no env override)."""
    home = tmp_path_factory.mktemp("wc") / "heron-home"
    home.mkdir()
    total = sum(EXPECTED.values())
    with running(home, EXAMPLES / "word_count.py", ["--sentences", str(N)], containers=2, capture=["count"],
                 until=lambda r: len(r["count"]) >= total, timeout=90) as run:
        yield run


@pytest.mark.parametrize("containers", [2, 3])
def test_counts_equal_a_plain_python_count(heron_home, request, containers):
    expected = EXPECTED
    total = sum(expected.values())
    if containers == 2:
        run = request.getfixturevalue("shared_wc")
    else:  # a launch-time option: its own run
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


def _topology_id(run):
    return LocalFsStateManager(run.home).get_scheduler_location(run.name)["topology_id"]


def test_one_process_per_task(shared_wc):
    procs = LocalScheduler.topology_processes(_topology_id(shared_wc))
    modules = _modules(procs)
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


def _mapped_files(pid):
    try:
        return {m.path for m in psutil.Process(pid).memory_maps()}
    except psutil.Error:
        return set()


@pytest.mark.parametrize("pure", [False, True], ids=["compiled", "HERON_PY_PURE=1"])
def test_the_daemons_run_the_compiled_hot_path_unless_told_to_run_its_source(heron_home, request, pure):
    """The extension modules installation built are what the tasks and stream managers run, and
    HERON_PY_PURE=1 in the submitter's environment makes every process of the topology run the
    .py files instead (same counts either way). The mode this pytest process's environment asks
    for is the shared topology's; the other one is launched here, told its mode."""
    built = {m: extension_file(m) for m in MODULES}
    built = {m: str(p) for m, p in built.items() if p is not None}
    if not built:
        pytest.skip("no hot-path module is compiled here: installed without a C compiler or with HERON_PY_PURE=1")
    if pure == pure_requested():
        expected, topology = EXPECTED, nullcontext(request.getfixturevalue("shared_wc"))
    else:
        expected = wc_common.expected_counts(500)
        # "" overrides a HERON_PY_PURE=1 of this test run's own environment (CI's pure-Python run)
        topology = running(heron_home, EXAMPLES / "word_count.py", ["--sentences", "500"], containers=2,
                           capture=["count"], until=lambda r: len(r["count"]) >= sum(expected.values()),
                           timeout=90, env={"HERON_PY_PURE": "1" if pure else ""})
    with topology as run:
        procs = LocalScheduler.topology_processes(_topology_id(run))
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
                            built["heron_py.acking.tracker"]} <= mapped[pid], role
        assert Counter(v[0] for v in run.values("count")) == expected


def test_last_a_killed_fork_server_is_replaced_when_a_task_restarts_and_kill_leaves_nothing(shared_wc):
    """Last in the module: it changes the shared topology (a task and a fork server killed),
    then kills it."""
    run = shared_wc
    state = LocalFsStateManager(run.home)
    topology_id = _topology_id(run)
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
    pids = [p.pid for p in LocalScheduler.topology_processes(topology_id)] + [p.pid for p in procs]
    kill_local(run.home, run.name)
    assert LocalScheduler.topology_processes(topology_id) == []
    assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
                   for pid in pids)
    assert state.get_topology(run.name) is None
