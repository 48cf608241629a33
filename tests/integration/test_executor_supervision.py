"""The local scheduler's supervisor (heron_py/scheduler/supervisor.py): kill -9 of container 0's
executor, on 2 containers without a standby master, used to leave container 0 dead for good (the
master never relaunches its own container, and it outlives its executor: seed 101 of the
effectively-once checker). The supervisor relaunches the container; the effectively-once counts
are exact at the end; ``kill`` stops the supervisor first and leaves no process behind."""

import os
import re
import signal

import psutil
import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.scheduler.local import SUPERVISOR_KEY, LocalScheduler, executor_records
from heron_py.testing.local import kill_local
from tests.integration.test_effectively_once import _checkpoints_done, _finish_exact, _start, _state
from tests.support import wait_for

pytestmark = pytest.mark.integration


def _executor_pid(name: str, container: int) -> int:
    info = _state().get_scheduler_location(name) or {}
    return next(r.pid for r in executor_records(info) if r.container == container)


def test_kill_9_of_container_0s_executor_is_relaunched_exact_and_kill_leaves_nothing(heron_home):
    name = "eo_sup_exec0"
    run = _start(heron_home, name)
    killed = False
    try:
        info = _state().get_scheduler_location(name)
        assert _state().get_packing_plan(name).num_containers == 2
        assert str(_state().get_topology(name).config.get("topology.tmanager.standby", "false")).lower() != "true"
        topology_id = info["topology_id"]
        sup_pid = int(info[SUPERVISOR_KEY]["pid"])
        assert "heron_py.scheduler.supervisor" in " ".join(psutil.Process(sup_pid).cmdline())
        old = _executor_pid(name, 0)
        wait_for(lambda: _checkpoints_done(heron_home, name) >= 2, 60, "two checkpoints")
        done = _checkpoints_done(heron_home, name)
        os.kill(old, signal.SIGKILL)
        new = wait_for(lambda: (p := _executor_pid(name, 0)) != old and psutil.pid_exists(p) and p, 60,
                       "a new executor for container 0")
        log = (TopologyPaths.of(name, heron_home).logs / "supervisor.log").read_text()
        assert re.search(rf"container 0: its executor \(pid {old}\) was gone; relaunched the container "
                         rf"\(executor pid {new}\), restart 1", log), log
        # the checkpoints after the relaunch are the new master's: counted in its fresh log
        _finish_exact(heron_home, name, fault_at_checkpoint=done)
        killed = True
        kill_local(heron_home, name)
        assert LocalScheduler.topology_processes(topology_id) == []
        assert not psutil.pid_exists(sup_pid) or psutil.Process(sup_pid).status() == psutil.STATUS_ZOMBIE
        log = (TopologyPaths.of(name, heron_home).logs / "supervisor.log").read_text()
        assert "relaunched the container" not in log.split(f"(executor pid {new}), restart 1")[-1]
    finally:
        if not killed:
            kill_local(heron_home, run.name)
