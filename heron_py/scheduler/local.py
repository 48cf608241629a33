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
from typing import Any

import psutil

from heron_py.scheduler.base import ContainerStatus, Scheduler
from heron_py.scheduler.paths import TOPOLOGY_ID_ENV, TopologyPaths
from heron_py.state import StateConfig, StateManager

LOOPBACK = "127.0.0.1"


class LocalScheduler(Scheduler):
    kind = "local"

    def __init__(self, state: StateManager, home: Path | None = None, state_config: StateConfig | None = None,
                 host: str = LOOPBACK) -> None:
        super().__init__(state)
        self.home = home
        self.state_config = state_config or StateConfig()
        self.host = host  # what every container binds and advertises (heron.network.bind.host)

    def launch(self, name: str, num_containers: int) -> dict[str, Any]:
        paths = TopologyPaths.of(name, self.home)
        paths.logs.mkdir(parents=True, exist_ok=True)
        topology_id = f"{name}-{uuid.uuid4().hex[:12]}"
        executors = {str(k): self._launch_executor(name, k, topology_id) for k in range(num_containers)}
        info: dict[str, Any] = {"scheduler": "local", "topology_id": topology_id, "executors": executors,
                                   "host": self.host}
        self.state.set_scheduler_location(name, info)
        return info

    def _launch_executor(self, name: str, k: int, topology_id: str) -> int:
        paths = TopologyPaths.of(name, self.home)
        env = dict(os.environ)
        env[TOPOLOGY_ID_ENV] = topology_id
        # containers see the user's code only through the topology package, as on a cluster
        env.pop("PYTHONPATH", None)
        env["HERON_PY_HOME"] = str(paths.home)
        with (paths.logs / f"executor-{k}.log").open("ab") as log:
            p = subprocess.Popen(
                [sys.executable, "-m", "heron_py.scheduler.executor", "--topology", name,
                 "--container", str(k), "--home", str(paths.home), "--host", self.host,
                 *self.state_config.to_args()],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True, cwd=str(paths.root))
        return p.pid

    def restart(self, name: str, containers: list[int], num_containers: int, grace_s: float = 10.0) -> None:
        """Stops the executors of ``containers`` (with their children) and starts them again;
        ``num_containers`` may differ from before (an update that repacked)."""
        info = dict(self.state.get_scheduler_location(name) or {})
        topology_id = str(info.get("topology_id", ""))
        executors = {str(k): int(v) for k, v in dict(info.get("executors", {})).items()}
        stop = [k for k in executors if int(k) in containers or int(k) >= num_containers]
        procs = []
        for k in stop:
            try:
                p = psutil.Process(executors[k])
                # the executor's session holds its children: they go with it
                procs.append(p)
                procs.extend(p.children(recursive=True))
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        _gone, alive = psutil.wait_procs(procs, timeout=grace_s)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=3)
        for k in stop:
            executors.pop(k, None)
        for c in containers:
            if c < num_containers:
                executors[str(c)] = self._launch_executor(name, c, topology_id)
        info["executors"] = executors
        self.state.set_scheduler_location(name, info)

    def containers(self, name: str) -> list[ContainerStatus]:
        info = self.state.get_scheduler_location(name) or {}
        out = []
        for k, pid in sorted(dict(info.get("executors", {})).items(), key=lambda kv: int(kv[0])):
            alive = psutil.pid_exists(int(pid))
            out.append(ContainerStatus(int(k), "running" if alive else "gone", str(info.get("host", LOOPBACK)),
                                       str(pid)))
        return out

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
