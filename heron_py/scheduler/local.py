"""The local scheduler: every container is an executor process on this host.

Each executor runs in a session of its own, so ``kill`` can signal an executor's whole
process group; every process also carries the topology's id in its environment, which is
how ``kill`` finds any process that escaped its group and makes sure none is left.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

from heron_py.scheduler.paths import TOPOLOGY_ID_ENV, TopologyPaths
from heron_py.state import StateManager


class LocalScheduler:
    def __init__(self, state: StateManager, home: Path | None = None) -> None:
        self.state = state
        self.home = home

    def launch(self, name: str, num_containers: int) -> dict[str, object]:
        paths = TopologyPaths.of(name, self.home)
        paths.logs.mkdir(parents=True, exist_ok=True)
        topology_id = f"{name}-{uuid.uuid4().hex[:12]}"
        env = dict(os.environ)
        env[TOPOLOGY_ID_ENV] = topology_id
        # containers see the user's code only through the topology package, as on a cluster
        env.pop("PYTHONPATH", None)
        env["HERON_PY_HOME"] = str(paths.home)
        executors: dict[str, int] = {}
        for k in range(num_containers):
            with (paths.logs / f"executor-{k}.log").open("ab") as log:
                p = subprocess.Popen(
                    [sys.executable, "-m", "heron_py.scheduler.executor", "--topology", name,
                     "--container", str(k), "--home", str(paths.home)],
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=env, start_new_session=True, cwd=str(paths.root))
            executors[str(k)] = p.pid
        info: dict[str, object] = {"scheduler": "local", "topology_id": topology_id, "executors": executors,
                                   "host": "127.0.0.1"}
        self.state.set_scheduler_location(name, info)
        return info

    @staticmethod
    def topology_processes(topology_id: str) -> list[psutil.Process]:
        out = []
        me = os.getpid()
        for p in psutil.process_iter(["pid"]):
            if p.pid == me:
                continue
            try:
                if p.environ().get(TOPOLOGY_ID_ENV) == topology_id:
                    out.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return out

    def kill(self, name: str, grace_s: float = 10.0) -> list[int]:
        """Stops every process of the topology; returns the pids that had to be SIGKILLed."""
        info = self.state.get_scheduler_location(name) or {}
        topology_id = str(info.get("topology_id", ""))
        executors = [int(p) for p in dict(info.get("executors", {})).values()]
        for pid in executors:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        procs = []
        for pid in executors:
            try:
                procs.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=max(0.1, deadline - time.monotonic()))
        killed: list[int] = []
        if topology_id:
            # anything still alive (an executor that hung, a child that escaped): SIGKILL
            for _ in range(3):
                left = self.topology_processes(topology_id)
                if not left:
                    break
                for p in left:
                    try:
                        p.kill()
                        killed.append(p.pid)
                    except psutil.NoSuchProcess:
                        pass
                psutil.wait_procs(left, timeout=3)
        return killed
