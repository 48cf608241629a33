"""Word count on the local scheduler: real processes, real sockets, exact counts."""

from collections import Counter, defaultdict

import psutil
import pytest
import wc_common

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
    # metrics manager and the fork server its daemons were forked from
    assert modules == {"instance": 5, "stream_manager": 2, "metrics_manager": 2, "topology_master": 1,
                       "heron_py.scheduler.executor": 2, "heron_py.scheduler.zygote": 2}
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
