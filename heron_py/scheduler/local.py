"""The local scheduler: every container is an executor process on this host.

Each executor runs in a session of its own, so ``kill`` can signal an executor's whole
process group; every process also carries the topology's id (and its container's index) in
its environment, which is how ``kill`` and ``restart`` find any process that escaped its
group or outlived its executor (an executor killed with SIGKILL leaves its children running).

A per-topology supervisor process (``heron_py/scheduler/supervisor.py``), started at launch
and stopped first at ``kill``, relaunches a container whose executor died. Relaunches (the
supervisor's, the master's relauncher's, ``heron-py restart``) hold the topology's scheduler
lock (``flock`` of ``scheduler.lock`` in the topology's folder), so two never interleave.

A stored pid is never trusted alone: pids are reused, so before a recorded executor is
signalled its create time must match the one recorded at launch and its environment must
carry the topology's id. A pid that fails the check belongs to some other process now: it is
logged and left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import getpass
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import psutil

from heron_py.common.container_layout import CONTAINER_ENV, TOPOLOGY_ID_ENV, TopologyPaths
from heron_py.common.logrotate import open_log
from heron_py.scheduler.base import ContainerStatus, Scheduler, SchedulerError
from heron_py.scheduler.zygote import ROOM, ROOM_FLAG
from heron_py.state import StateConfig, StateManager

LOOPBACK = "127.0.0.1"
# the record's field with each container's executor create time (psutil, seconds since the epoch)
STARTED_KEY = "executor_started"
# one process reports the same create time every time; the slack only absorbs float rounding
CREATE_TIME_SLACK_S = 0.05
# the record's field with the supervisor's pid and create time
SUPERVISOR_KEY = "supervisor"
LOCK_FILE = "scheduler.lock"
# how often a stop looks whether the processes it signalled have exited: the waits below are
# for processes that exit within a few hundred milliseconds, so a coarse poll is most of a stop
EXIT_POLL_S = 0.02
# after SIGKILL: the kernel ends a process at once, this only bounds a wait that cannot fail
AFTER_KILL_S = 3.0

P = TypeVar("P")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExecutorRecord:
    """What the scheduler stored about one container's executor."""

    container: int
    pid: int
    started: float | None  # None in a record written before create times were kept


def executor_records(info: dict[str, Any]) -> list[ExecutorRecord]:
    started = {str(k): float(v) for k, v in dict(info.get(STARTED_KEY, {})).items()}
    return [ExecutorRecord(int(k), int(pid), started.get(str(k)))
            for k, pid in sorted(dict(info.get("executors", {})).items(), key=lambda kv: int(kv[0]))]


def _env_of(p: psutil.Process) -> dict[str, str] | None:
    """The process's environment; None when this user may not read it (another user's)."""
    try:
        return p.environ()
    except psutil.AccessDenied:
        return None


def identity_problem(p: psutil.Process, rec: ExecutorRecord, topology_id: str) -> str | None:
    """Why ``p`` (at the recorded pid) is not the recorded executor; None when it is.
    Raises psutil.NoSuchProcess (ZombieProcess included) when the pid is gone."""
    started = p.create_time()
    env = _env_of(p)
    found_id = "unreadable" if env is None else env.get(TOPOLOGY_ID_ENV, "unset")
    same_start = rec.started is None or abs(started - rec.started) <= CREATE_TIME_SLACK_S
    same_topology = found_id == topology_id if topology_id else rec.started is not None
    if same_start and same_topology:
        return None
    expected_start = "" if rec.started is None else f"started at {rec.started:.2f} "
    return (f"pid {rec.pid} (executor of container {rec.container}) is not this topology's executor any more: "
            f"expected a process {expected_start}with {TOPOLOGY_ID_ENV}={topology_id or '?'}, found "
            f"'{p.name()}' started at {started:.2f} with {TOPOLOGY_ID_ENV} {found_id}; left alone (not signalled)")


def process_container(p: psutil.Process, topology_id: str) -> int | None:
    """The container index of a process of this topology; None for any other process."""
    env = _env_of(p)
    if not topology_id or env is None or env.get(TOPOLOGY_ID_ENV) != topology_id:
        return None
    raw = env.get(CONTAINER_ENV)
    if raw is not None and raw.isdigit():
        return int(raw)
    # a process started before CONTAINER_ENV existed: the executor runs its children in the
    # container's folder (container-K)
    folder = Path(p.cwd()).name
    prefix = "container-"
    return int(folder[len(prefix):]) if folder.startswith(prefix) and folder[len(prefix):].isdigit() else None


def _owner(p: psutil.Process) -> str:
    try:
        return p.username()
    except (psutil.Error, KeyError):
        return "unknown"


def signal_all(procs: list[psutil.Process], sig: int, action: str) -> None:
    """Sends ``sig`` to each process that still runs; SchedulerError naming the processes this
    user may not signal (after signalling all the others)."""
    denied: list[psutil.Process] = []
    for p in procs:
        try:
            p.send_signal(sig)
        except psutil.NoSuchProcess:
            pass  # gone already: nothing to stop (psutil also refuses a pid reused since)
        except psutil.AccessDenied:
            denied.append(p)
    if denied:
        found = ", ".join(f"pid {p.pid} of user {_owner(p)}" for p in denied)
        raise SchedulerError(f"{action}: permission denied sending {signal.Signals(sig).name} to {found}; "
                             f"expected processes of user {getpass.getuser()} (run heron-py as the user who "
                             f"submitted the topology)")


def exited(p: psutil.Process) -> bool:
    """Whether ``p`` has ended: its pid is free or reused, or it is a zombie. A zombie has run its
    exit and holds nothing but its process-table entry until its parent reaps it; the parent of
    a topology's processes is whatever reaps orphans (``submit`` has exited), which in a container
    without a real init can take seconds, and psutil.wait_procs waits for that reaping."""
    try:
        return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_exited(procs: Sequence[P], timeout_s: float, has_exited: Callable[[P], bool], *,
                clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                poll_s: float = EXIT_POLL_S) -> list[P]:
    """Waits until every process of ``procs`` has exited, or ``timeout_s``; returns those still
    running (in their order). One wait for all of them, polled every ``poll_s``: a stop that
    signalled them all at once waits as long as the slowest, not the sum. Pure but for the
    injected ``has_exited``, ``clock`` and ``sleep``."""
    deadline = clock() + timeout_s
    alive = list(procs)
    while True:
        alive = [p for p in alive if not has_exited(p)]
        left = deadline - clock()
        if not alive or left <= 0:
            return alive
        sleep(min(poll_s, left))


def stop_processes(procs: list[psutil.Process], grace_s: float, action: str) -> list[int]:
    """SIGTERM (with SIGCONT, so a stopped process handles it), ``grace_s`` to exit, then SIGKILL;
    returns the pids that needed SIGKILL."""
    unique = list({p.pid: p for p in procs}.values())
    signal_all(unique, signal.SIGTERM, action)
    signal_all(unique, signal.SIGCONT, action)
    alive = wait_exited(unique, grace_s, exited)
    signal_all(alive, signal.SIGKILL, action)
    wait_exited(alive, AFTER_KILL_S, exited)
    return [p.pid for p in alive]


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
        paths.private(paths.logs)
        topology_id = f"{name}-{uuid.uuid4().hex[:12]}"
        launched = [self._launch_executor(name, k, topology_id) for k in range(num_containers)]
        info: dict[str, Any] = {"scheduler": "local", "topology_id": topology_id, "host": self.host,
                                "executors": {str(r.container): r.pid for r in launched},
                                STARTED_KEY: {str(r.container): r.started for r in launched}}
        self.state.set_scheduler_location(name, info)
        # after the record, which it reads: it exits at once if it finds another run's
        info[SUPERVISOR_KEY] = self._launch_supervisor(name, topology_id)
        self.state.set_scheduler_location(name, info)
        return info

    def _launch_supervisor(self, name: str, topology_id: str) -> dict[str, float]:
        paths = TopologyPaths.of(name, self.home)
        env = dict(os.environ)
        env[TOPOLOGY_ID_ENV] = topology_id  # kill finds it like any process of the topology
        env.pop(CONTAINER_ENV, None)  # in no container: a container's restart must not stop it
        env.pop("PYTHONPATH", None)
        env["HERON_PY_HOME"] = str(paths.home)
        with open_log(paths.logs / "supervisor.log") as out:
            p = subprocess.Popen(
                [sys.executable, "-m", "heron_py.scheduler.supervisor", "--topology", name,
                 "--topology-id", topology_id, "--home", str(paths.home), "--host", self.host,
                 *self.state_config.to_args()],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True, cwd=str(paths.root))
        try:
            started = psutil.Process(p.pid).create_time()
        except psutil.NoSuchProcess:
            started = 0.0
        return {"pid": p.pid, "started": started}

    @contextlib.contextmanager
    def _lock(self, name: str) -> Iterator[None]:
        """The topology's scheduler lock, across processes (the supervisor, the master, the CLI)."""
        root = TopologyPaths.of(name, self.home).root
        root.mkdir(parents=True, exist_ok=True)
        with (root / LOCK_FILE).open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def dead_executors(self, name: str, topology_id: str) -> dict[int, int]:
        """Container -> recorded pid of each executor of the running topology that is gone."""
        info = self.state.get_scheduler_location(name) or {}
        if str(info.get("topology_id", "")) != topology_id:
            return {}
        return {rec.container: rec.pid for rec in executor_records(info)
                if self._verified("supervise", rec, topology_id, quiet=True) is None}

    def relaunch_if_gone(self, name: str, container: int, pid: int) -> int | None:
        """Relaunches ``container`` when the record still names executor ``pid`` and it is gone
        (checked under the lock); returns the new executor's pid, or None when another relaunch
        came first or the topology is gone."""
        with self._lock(name):
            info = dict(self.state.get_scheduler_location(name) or {})
            topology_id = str(info.get("topology_id", ""))
            rec = next((r for r in executor_records(info) if r.container == container), None)
            if rec is None or rec.pid != pid or self._verified("supervise", rec, topology_id, quiet=True):
                return None
            packing = self.state.get_packing_plan(name)
            if packing is None:
                return None  # killed meanwhile
            new = self._restart_locked(name, [container], packing.num_containers, 10.0)
            return new.get(container)

    def _stop_supervisor(self, info: dict[str, Any], action: str) -> None:
        """Stops the topology's supervisor (SIGTERM and SIGCONT, then SIGKILL) before its executors
        stop, so it never takes their exit for a death to repair. It ends within a few
        milliseconds of SIGTERM (its loop waits on the signal, not a sleep), so this wait is short."""
        sup = dict(info.get(SUPERVISOR_KEY) or {})
        if not sup:
            return
        rec = ExecutorRecord(-1, int(sup.get("pid", 0)), float(sup["started"]) if sup.get("started") else None)
        if rec.pid <= 0:
            return
        p = self._verified(action, rec, str(info.get("topology_id", "")), quiet=True)
        if p is not None:
            stop_processes([p], 5.0, action)

    def _launch_executor(self, name: str, k: int, topology_id: str) -> ExecutorRecord:
        paths = TopologyPaths.of(name, self.home)
        env = dict(os.environ)
        env[TOPOLOGY_ID_ENV] = topology_id
        env[CONTAINER_ENV] = str(k)
        # containers see the user's code only through the topology package, as on a cluster
        env.pop("PYTHONPATH", None)
        env["HERON_PY_HOME"] = str(paths.home)
        with open_log(paths.logs / f"executor-{k}.log") as out:
            p = subprocess.Popen(
                [sys.executable, "-m", "heron_py.scheduler.executor", "--topology", name,
                 "--container", str(k), "--home", str(paths.home), "--host", self.host,
                 *self.state_config.to_args(),
                 # the room its fork server writes children's command lines in, last (the executor
                 # shows what came before it); given here, the executor need not execute itself
                 # again to get it (executor._with_room: one interpreter start and import less)
                 ROOM_FLAG, "." * ROOM],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, start_new_session=True, cwd=str(paths.root))
        try:
            started: float | None = psutil.Process(p.pid).create_time()
        except psutil.NoSuchProcess:
            started = None  # died at once (its log says why); the record still names it
        return ExecutorRecord(k, p.pid, started)

    def _verified(self, action: str, rec: ExecutorRecord, topology_id: str, quiet: bool = False
                  ) -> psutil.Process | None:
        """The recorded executor when its pid still is it; None when it is gone or the pid now
        belongs to another process (logged unless ``quiet``)."""
        try:
            p = psutil.Process(rec.pid)
            problem = identity_problem(p, rec, topology_id)
        except psutil.NoSuchProcess:
            return None
        if problem is not None:
            if not quiet:
                log.warning("%s: %s", action, problem)
            return None
        return p

    def container_processes(self, topology_id: str, containers: set[int]) -> list[psutil.Process]:
        """Every live process of the topology in one of ``containers``, found by environment:
        also those whose executor died and left them running."""
        out = []
        for p in self.topology_processes(topology_id):
            try:
                if process_container(p, topology_id) in containers:
                    out.append(p)
            except psutil.Error:
                continue
        return out

    def _stop_containers(self, action: str, info: dict[str, Any], containers: set[int], grace_s: float) -> None:
        topology_id = str(info.get("topology_id", ""))
        executors = []
        for rec in executor_records(info):
            if rec.container in containers:
                p = self._verified(action, rec, topology_id)
                if p is not None:
                    executors.append(p)
        # the executor stops its children itself; SIGTERM to them too would race its restarts
        signal_all(executors, signal.SIGTERM, action)
        procs = list(executors)
        for p in executors:
            try:
                procs.extend(p.children(recursive=True))
            except psutil.NoSuchProcess:
                pass
        alive = wait_exited(procs, grace_s, exited)
        # what is left, and any process of these containers that outlived a dead executor: two
        # stream managers of one container must never run side by side
        orphans = [p for p in self.container_processes(topology_id, containers) if p.pid not in {q.pid for q in alive}]
        stop_processes([*alive, *orphans], grace_s if orphans else 0.0, action)

    def restart(self, name: str, containers: list[int], num_containers: int, grace_s: float = 10.0) -> None:
        """Stops the executors of ``containers`` (with their children, and any process of those
        containers a dead executor left behind) and starts them again; ``num_containers`` may
        differ from before (an update that repacked)."""
        with self._lock(name):
            self._restart_locked(name, containers, num_containers, grace_s)

    def _restart_locked(self, name: str, containers: list[int], num_containers: int, grace_s: float
                        ) -> dict[int, int]:
        """restart's body, under the lock; returns the new executors' pids by container."""
        info = dict(self.state.get_scheduler_location(name) or {})
        topology_id = str(info.get("topology_id", ""))
        records = {r.container: r for r in executor_records(info)}
        stop = {k for k in records if k in containers or k >= num_containers} | set(containers)
        self._stop_containers(f"restart local '{name}'", info, stop, grace_s)
        for k in stop:
            records.pop(k, None)
        for c in containers:
            if c < num_containers:
                records[c] = self._launch_executor(name, c, topology_id)
        info["executors"] = {str(k): r.pid for k, r in sorted(records.items())}
        info[STARTED_KEY] = {str(k): r.started for k, r in sorted(records.items()) if r.started is not None}
        self.state.set_scheduler_location(name, info)
        return {c: records[c].pid for c in containers if c in records}

    def containers(self, name: str) -> list[ContainerStatus]:
        info = self.state.get_scheduler_location(name) or {}
        topology_id = str(info.get("topology_id", ""))
        out = []
        for rec in executor_records(info):
            alive = self._verified("status", rec, topology_id, quiet=True) is not None
            out.append(ContainerStatus(rec.container, "running" if alive else "gone",
                                       str(info.get("host", LOOPBACK)), str(rec.pid)))
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
        action = f"kill local '{name}'"
        self._stop_supervisor(info, action)
        # read again: the supervisor may have relaunched a container before it stopped
        info = self.state.get_scheduler_location(name) or info
        executors = [p for rec in executor_records(info) if (p := self._verified(action, rec, topology_id))]
        signal_all(executors, signal.SIGTERM, action)
        ours = {p.pid for p in executors}
        for p in executors:
            try:
                ours |= {c.pid for c in p.children(recursive=True)}
            except psutil.NoSuchProcess:
                pass
        # one scan of the process table serves both (it reads every process's environment)
        everyone = self.topology_processes(topology_id) if topology_id else []
        # processes whose executor died (SIGKILL) have nobody to stop them: SIGTERM them too
        orphans = [p for p in everyone if p.pid not in ours]
        signal_all(orphans, signal.SIGTERM, action)
        # a process stopped with SIGSTOP keeps SIGTERM pending until it runs again: continue
        # them all, so a frozen executor or daemon stops within the grace, not at SIGKILL
        signal_all(everyone, signal.SIGCONT, action)
        wait_exited([*executors, *orphans], grace_s, exited)
        killed: list[int] = []
        if topology_id:
            # anything still alive (an executor that hung, a child that escaped): SIGKILL
            for _ in range(3):
                left = self.topology_processes(topology_id)
                if not left:
                    break
                signal_all(left, signal.SIGKILL, action)
                killed.extend(p.pid for p in left)
                wait_exited(left, AFTER_KILL_S, exited)
        return killed
