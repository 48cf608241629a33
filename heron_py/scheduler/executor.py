"""The executor: one per container. Starts, watches and restarts the container's processes.

Children: the topology master (container 0), the metrics manager, the stream manager, and one instance process
per task packed into this container. With ``topology.tmanager.standby`` true, the last
container also runs a standby topology master, which takes over when the active one dies.
A child that exits while the executor is not stopping is restarted after a backoff that
doubles from 0.5 s up to 10 s and resets once the child has stayed up for 30 s. Every
restart is a log line and is counted in ``restarts.json`` beside the container's working
folder, which holds every child's count (0 until it restarts) from the container's start.

Every ``logrotate.CHECK_EVERY_S`` the supervision loop caps the container's logs (and this
executor's own ``executor-K.log``) at ``heron.logging.maximum.size.mb``, keeping
``heron.logging.maximum.files`` old ones, by copy-then-truncate (the children hold them open).
At its start it sweeps the temporary files a crash left (``atomic.sweep_temp_files``) in the
container's folder and the topology's checkpoint folder.

A live rescale (``heron-py update`` without a restart) changes the tasks of a running container:
every ``reconcile_every_s`` the executor reads the stored packing plan and physical plan (off the
supervision loop: a ZooKeeper read may block for its retry deadline) and starts the tasks this
container gains, and stops (SIGTERM, then SIGKILL after a grace, without waiting on the loop) the
ones it loses, as ``task_changes`` decides; its daemons and the tasks it keeps run on untouched.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from heron_py.checkpoint.storage import checkpoint_root
from heron_py.common.alive import ALIVE_ENV, EXECUTOR_ENV, silent_for
from heron_py.common.atomic import SweepTarget, atomic_write_bytes, atomic_write_text, sweep_temp_files
from heron_py.common.config import (
    EXECUTOR_LIVENESS,
    FORK_SERVER,
    ConfigError,
    InstanceConfig,
    LinkConfig,
    LogCaps,
    StatefulConfig,
)
from heron_py.common.container_layout import CONTAINER_ENV, TopologyPaths
from heron_py.common.daemon import setup_logging
from heron_py.common.guard import RateLimitedLog
from heron_py.common.logrotate import CHECK_EVERY_S, logs_in, open_log, rotate_logs
from heron_py.common.package import PackageError, unpack
from heron_py.common.process import StopSignals
from heron_py.planner.model import PackingPlan, TaskPlacement, TopologyDef
from heron_py.scheduler.forked import ForkedProcess, Zygote, ZygoteError, reap_orphans
from heron_py.scheduler.hosts import HostError, resolve_host
from heron_py.scheduler.zygote import ROOM, ROOM_FLAG, become_subreaper, set_cmdline
from heron_py.state import StateConfig, StateManager, StateManagerError, open_state
from heron_py.state import config as statecfg
from heron_py.state.localfs import private_home

BACKOFF_MIN_S = 0.5
BACKOFF_MAX_S = 10.0
STABLE_S = 30.0
STANDBY_KEY = "topology.tmanager.standby"
# the stop's second wave: the daemons, once the tasks are gone, have nothing left to wait for
DAEMONS_GRACE_S = 2.0
# how often the executor reads the plans to follow a live rescale
RECONCILE_EVERY_S = 0.5
# a task a rescale removes: from its SIGTERM to its SIGKILL (its drain,
# heron_py.instance.shutdown.drain.secs, is 3 s by default, then its last metrics report)
TASK_STOP_GRACE_S = 5.0
# a state manager that cannot be read: one line per this long, not one per read
STATE_ERROR_LOG_EVERY_S = 60.0


@dataclass
class Child:
    name: str
    argv: list[str]
    log_path: Path
    proc: subprocess.Popen[bytes] | ForkedProcess | None = None
    started_at: float = 0.0
    restarts: int = 0
    backoff: float = BACKOFF_MIN_S
    restart_at: float | None = None
    log_file: IO[bytes] | None = field(default=None, repr=False)
    alive_file: Path | None = None  # touched every second by the child (heron_py/common/alive.py)
    started_wall: float = 0.0  # time.time() at its start: the alive file's mtime is wall-clock
    task: bool = False  # an instance (one task); else a daemon (master, stream or metrics manager)
    task_id: int | None = None  # an instance's task, which a rescale may start or stop


@dataclass(frozen=True)
class TaskChanges:
    start: tuple[TaskPlacement, ...]  # by task id
    stop: tuple[int, ...]  # task ids, ascending


def task_changes(container: int, packing: PackingPlan, applied: PackingPlan | None,
                 running: Collection[int]) -> TaskChanges:
    """The tasks this container starts and stops (pure), given the stored packing plan, the
    packing of the stored physical plan (``applied``; None: none stored yet) and the tasks it
    runs. It runs the union of both plans' tasks in it: a task starts as soon as the packing
    stages it, so it is connected to its stream manager before the master switches to the plan
    that routes to it; a removed task runs until the applied plan drops it, so it finishes
    (acks, drains) what it holds."""
    wanted = {t.task_id: t for t in applied.tasks_in(container)} if applied is not None else {}
    wanted.update((t.task_id, t) for t in packing.tasks_in(container))  # the newer placement
    have = set(running)
    return TaskChanges(start=tuple(wanted[i] for i in sorted(wanted.keys() - have)),
                       stop=tuple(sorted(have - wanted.keys())))


@dataclass(frozen=True)
class PlanRead:
    """What one read of the state manager found for a reconcile."""

    packing: PackingPlan | None  # None: no topology (being killed): nothing changes
    applied: PackingPlan | None  # the stored physical plan's packing
    # read (signature checked) only when a task must start; None: not read (a read with tasks to
    # start fails without it)
    topology: TopologyDef | None


class BackgroundRead:
    """One read at a time on a thread of its own, its outcome taken by the supervision loop: a
    ZooKeeper read blocks up to its retry deadline (30 s), and the loop must go on restarting
    and probing the children meanwhile."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._outcome: PlanRead | Exception | None = None

    @property
    def busy(self) -> bool:
        return self._thread is not None

    def start(self, read: Callable[[], PlanRead]) -> None:
        def run() -> None:
            try:
                self._outcome = read()
            except Exception as e:  # any failure must reach the loop's log, and free the next read
                self._outcome = e

        self._thread = threading.Thread(target=run, name="plan-read", daemon=True)
        self._thread.start()

    def take(self) -> PlanRead | Exception | None:
        """The finished read's outcome (once), else None."""
        if self._thread is None or self._thread.is_alive():
            return None
        self._thread.join()
        self._thread = None
        outcome, self._outcome = self._outcome, None
        return outcome


@dataclass
class Ending:
    """A task a rescale removed, sent SIGTERM: polled until it exits; SIGKILL at ``kill_at``."""

    child: Child
    proc: subprocess.Popen[bytes] | ForkedProcess  # child.proc, which is set
    kill_at: float
    killed: bool = False


@dataclass(frozen=True)
class TaskCommand:
    """An instance's command line but for its component's config: the container's, as prepare()
    read it. A rescale keeps it for the tasks it adds: the container's daemons, whose links the
    tasks share, run on with theirs."""

    python: str
    common: tuple[str, ...]  # the topology and its secret file
    port_file: Path  # the stream manager's
    package_dir: Path
    host: str
    ckpt_root: Path
    container: int
    link_args: tuple[str, ...]  # LinkConfig.args
    logs: Path

    def child(self, t: TaskPlacement, topology: TopologyDef) -> Child:
        """Task ``t``'s instance, its queues from its component's config in ``topology``. Raises
        KeyError (no such component) and ConfigError."""
        comp = topology.component(t.component)
        icfg = InstanceConfig.from_config({**topology.config, **comp.config})
        return Child(
            f"{t.component}-{t.task_id}",
            [self.python, "-m", "instance", *self.common, "--task-id", str(t.task_id), "--component", t.component,
             "--sm-port-file", str(self.port_file), "--package-dir", str(self.package_dir),
             "--in-queue-batches", str(icfg.in_queue_batches), "--in-queue-bytes", str(icfg.in_queue_bytes),
             "--out-queue-batches", str(icfg.out_queue_batches), "--out-queue-bytes", str(icfg.out_queue_bytes),
             "--metrics-interval", str(icfg.metrics_interval_s), "--sm-host", self.host,
             "--checkpoint-root", str(self.ckpt_root), "--container", str(self.container), *self.link_args,
             *([] if icfg.unix_socket else ["--tcp"])],
            self.logs / f"{t.component}-{t.task_id}.log", task=True, task_id=t.task_id)


class TaskRescaler:
    """A container's tasks following the stored plans (a live rescale), for its executor: reads
    the plans (on a thread from the loop, BackgroundRead), starts the tasks ``task_changes`` adds
    and stops, without waiting, the ones it removes (SIGTERM now, SIGKILL at the grace on the
    executor's clock, polled by the loop). A state manager that cannot be read costs one line a
    minute; the next read tries again."""

    def __init__(self, ex: Executor, secret: bytes, command: TaskCommand, *, every_s: float,
                 grace_s: float) -> None:
        self.ex = ex
        self.secret = secret  # the topology document's signature is checked under it
        self.command = command
        self.every_s = every_s
        self.grace_s = grace_s
        self.read = BackgroundRead()
        self.ending: list[Ending] = []  # tasks it stopped, until they exit
        self._next_read = 0.0
        self._warn = RateLimitedLog(ex.log, interval_s=STATE_ERROR_LOG_EVERY_S, burst=1, clock=ex.clock)
        self._failures = 0

    def running(self) -> set[int]:
        return {c.task_id for c in self.ex.children if c.task_id is not None}

    def read_plans(self, running: Collection[int]) -> PlanRead:
        """The plans (and, when ``running`` lacks a task of theirs, the topology, its signature
        checked). Blocks on ZooKeeper; raises StateManagerError."""
        state, name = self.ex.state, self.ex.topology
        packing = state.get_packing_plan(name)
        pplan = state.get_physical_plan(name)
        applied = None if pplan is None else pplan.packing
        topology = None
        if packing is not None and task_changes(self.ex.container, packing, applied, running).start:
            topology = state.get_topology(name, self.secret)
            if topology is None:
                raise StateManagerError(f"topology '{name}': expected its topology document beside its packing "
                                        f"plan, found none")
        return PlanRead(packing, applied, topology)

    def reconcile(self) -> None:
        """Reads the plans here (blocking) and applies them."""
        if self.ex.stopping:
            return
        try:
            outcome: PlanRead | Exception = self.read_plans(self.running())
        except StateManagerError as e:
            outcome = e
        self._settle(outcome)

    def poll(self, now: float) -> None:
        """The supervision loop's turn: the stopping tasks checked, a finished read applied, the
        next read started when due."""
        self._poll_ending(now)
        if self.ex.stopping:
            return
        outcome = self.read.take()
        if outcome is not None:
            self._settle(outcome)
        if now >= self._next_read and not self.read.busy:
            self._next_read = now + self.every_s
            running = self.running()  # only a settle changes it, and one read is out at a time
            self.read.start(lambda: self.read_plans(running))

    def _settle(self, outcome: PlanRead | Exception) -> None:
        ex = self.ex
        if ex.stopping:
            return
        if isinstance(outcome, Exception):
            self._failures += 1
            why = str(outcome) if isinstance(outcome, StateManagerError) else f"{type(outcome).__name__}: {outcome}"
            self._warn.warning("executor %d: cannot read the plans of topology '%s' from the state manager (%s) "
                               "to follow a rescale: %s; trying again every %g s", ex.container, ex.topology,
                               ex.state_config.describe(), why, self.every_s, kind="plan-read")
            return
        if self._failures:
            ex.log.info("executor %d: read the plans of topology '%s' again after %d failed reads", ex.container,
                        ex.topology, self._failures)
            self._failures = 0
        if outcome.packing is None:
            return  # the topology's documents are gone: a kill, which stops the container itself
        changes = task_changes(ex.container, outcome.packing, outcome.applied, self.running())
        for task_id in changes.stop:
            self._stop_task(task_id)
        started = [c for t in changes.start if (c := self._new_child(t, outcome.topology)) is not None]
        for child in started:
            ex.log.info("rescale: task %s is new in container %d's plans; starting it", child.name, ex.container)
            ex.children.append(child)
            ex._spawn(child)
        if changes.stop or started:
            ex._write_restarts()

    def _new_child(self, t: TaskPlacement, topology: TopologyDef | None) -> Child | None:
        if topology is None:
            return None  # read for other running tasks (the next read has it): nothing to say
        where = f"executor {self.ex.container}: cannot start task {t.component}-{t.task_id} of topology " \
                f"'{self.ex.topology}'"
        try:
            return self.command.child(t, topology)
        except KeyError:
            self._warn.warning("%s: expected component '%s' in the stored topology, found only %s", where,
                               t.component, ", ".join(c.name for c in topology.components), kind="task-start")
        except ConfigError as e:
            self._warn.warning("%s: %s", where, e, kind="task-start")
        return None

    def _stop_task(self, task_id: int) -> None:
        """Takes the task out of supervision and sends it SIGTERM (SIGCONT too: a stopped process
        handles it only once continued); _poll_ending sees it exit, or kills it at the grace."""
        ex = self.ex
        child = next(c for c in ex.children if c.task_id == task_id)
        ex.children.remove(child)
        proc = child.proc
        if proc is None or proc.poll() is not None:
            ex.log.info("rescale: task %s left container %d's plans; it was not running", child.name, ex.container)
            _close_ended(child)
            return
        ex.log.info("rescale: task %s left container %d's plans; stopping it (pid %d): SIGTERM, SIGKILL after %g s",
                    child.name, ex.container, proc.pid, self.grace_s)
        try:
            proc.terminate()
            os.kill(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        self.ending.append(Ending(child, proc, ex.clock() + self.grace_s))

    def _poll_ending(self, now: float) -> None:
        for e in list(self.ending):
            if e.proc.poll() is not None:
                self.ending.remove(e)
                _close_ended(e.child)
            elif now >= e.kill_at and not e.killed:
                self.ex.log.warning("rescale: task %s (pid %d) did not exit within %g s of its SIGTERM; sent "
                                    "SIGKILL", e.child.name, e.proc.pid, self.grace_s)
                try:
                    e.proc.kill()
                except ProcessLookupError:
                    pass
                e.killed = True


def _close_ended(child: Child) -> None:
    if child.log_file is not None:
        child.log_file.close()
        child.log_file = None
    if child.alive_file is not None:
        child.alive_file.unlink(missing_ok=True)


def sweep_container_temp_files(workdir: Path, checkpoints: Path | None, now: float, log: logging.Logger) -> None:
    """The leftovers of writes a crash interrupted, in the folders a container writes: its own
    (its files are at the top; package/ is the user's) and the topology's checkpoints
    (TOPOLOGY/ID/TASK; None: they are in Redis, which leaves no files here). The local state
    store sweeps its own when it opens."""
    targets = [SweepTarget(workdir, depth=1)]
    if checkpoints is not None:
        targets.append(SweepTarget(checkpoints, depth=2))
    removed, errors = sweep_temp_files(targets, now)
    for path in removed:
        log.info("removed %s, a temporary file left by an interrupted write", path)
    for line in errors:
        log.warning("%s", line)


def stop_waves(children: list[Child]) -> tuple[list[Child], list[Child]]:
    """The order of a container's stop (pure): the tasks first, then the daemons. A task's stop
    drains what it emitted to its stream manager within heron_py.instance.shutdown.drain.secs,
    then sends its last metrics report to the metrics manager: both must still run then. Stopped
    together, a task waited out its drain deadline and the last report's timeout for daemons
    already gone, and that report was lost."""
    return [c for c in children if c.task], [c for c in children if not c.task]


def next_backoff(current: float, uptime: float) -> float:
    """Backoff before the next restart, given the child's uptime before it died."""
    if uptime >= STABLE_S:
        return BACKOFF_MIN_S
    return min(BACKOFF_MAX_S, current * 2)


def _liveness(config: Mapping[str, Any], given: float | None) -> tuple[float, list[str]]:
    """The probe's timeout (``given`` by a test, else the topology's) and, as the instances'
    arguments, their links' frame limit and heartbeats (``LinkConfig``): an instance connects
    before the physical plan brings it the config. Raises ConfigError."""
    timeout = float(EXECUTOR_LIVENESS.parse(config)) if given is None else given
    return timeout, LinkConfig.from_config(config).args()


class Executor:
    def __init__(self, *, topology: str, container: int, home: Path | None, log: logging.Logger,
                 clock: Callable[[], float] = time.monotonic, state_config: StateConfig | None = None,
                 host: str = "127.0.0.1", zygote: Zygote | None = None,
                 wall: Callable[[], float] = time.time, liveness_timeout_s: float | None = None,
                 log_check_s: float = CHECK_EVERY_S, reconcile_every_s: float = RECONCILE_EVERY_S,
                 task_stop_grace_s: float = TASK_STOP_GRACE_S) -> None:
        self.topology = topology
        self.host = host  # what the container's daemons bind and advertise
        self.container = container
        self.paths = TopologyPaths.of(topology, home)
        self.state_config = state_config or StateConfig()
        self.state = open_state(self.state_config, home)
        self.log = log
        self.clock = clock
        self.wall = wall
        # a child that has not touched its liveness file for this long (frozen by SIGSTOP, a stuck
        # event loop) is killed with SIGKILL and restarted (its daemons touch it every second); 0:
        # never. Given here by a test, else the topology's, read in prepare()
        self._liveness_given = liveness_timeout_s
        self.liveness_timeout_s = float(EXECUTOR_LIVENESS.default if liveness_timeout_s is None else liveness_timeout_s)
        self.children: list[Child] = []
        self.stopping = False
        self.fork_server = False  # heron_py.executor.fork.server, read in prepare()
        self._runs_master = False  # a master (active or standby) is forked here: prepare() knows
        self.zygote = zygote  # forked from this process before it had threads (main); or made on first need
        self._zygote_log: IO[bytes] | None = None
        self.log_caps = LogCaps()  # the topology's, read in prepare()
        self.log_check_s = log_check_s
        self._next_log_check = 0.0
        self.reconcile_every_s = reconcile_every_s
        self.task_stop_grace_s = task_stop_grace_s
        # made by prepare(), which reads what it needs
        self.rescaler: TaskRescaler | None = None

    def prepare(self) -> None:
        layout = self.paths.layout(self.container)
        workdir = self.paths.private(layout.folder)
        self.paths.private(self.paths.container_logs(self.container))
        package = self.state.get_package(self.topology)
        secret = self.state.get_secret(self.topology)
        packing = self.state.get_packing_plan(self.topology)
        if package is None or secret is None or packing is None:
            raise SystemExit(f"executor {self.container}: topology '{self.topology}' is not in the state "
                             f"manager (package, secret or packing plan missing)")
        self.package_dir = layout.package
        try:
            # the package's code runs here: only one signed under the topology secret is unpacked
            unpack(package, self.package_dir, secret=secret,
                   where=f"executor {self.container}: topology '{self.topology}' ({self.state_config.describe()})")
        except PackageError as e:
            raise SystemExit(str(e)) from None
        self.secret_file = layout.secret
        # a new file (O_EXCL) renamed over the path: a symlink planted there is replaced, never
        # followed, and nobody sees the secret in a file with looser permissions meanwhile
        atomic_write_bytes(self.secret_file, secret, mode=0o600)
        # the checkpoint files' key (kept across kills, unlike the secret), beside it; the master
        # and the instances read it from there (checkpoint_key_beside)
        atomic_write_bytes(layout.checkpoint_key, self.state.get_checkpoint_key(self.topology) or secret,
                           mode=0o600)
        tls = self.state.get_tls(self.topology)
        self.tls_args: list[str] = []
        if tls is not None:
            tls_file = layout.tls
            atomic_write_bytes(tls_file, tls, mode=0o600)
            self.tls_args = ["--tls-file", str(tls_file)]
        self.port_file = layout.stmgr_port
        self.port_file.unlink(missing_ok=True)
        py = sys.executable
        home = ["--home", str(self.paths.home)]
        logs = self.paths.container_logs(self.container)
        common = ["--topology", self.topology, "--secret-file", str(self.secret_file)]
        daemon = ["--host", self.host, *self.tls_args]
        stateargs = self.state_config.to_args()
        try:
            topology = self.state.get_topology(self.topology, secret)  # its signature checked, as the package's
        except StateManagerError as e:
            raise SystemExit(f"executor {self.container}: {e}") from None
        assert topology is not None
        try:
            self.log_caps = LogCaps.from_config(topology.config)
            self.liveness_timeout_s, link_args = _liveness(topology.config, self._liveness_given)
            ckpt_root = checkpoint_root(self.paths.home, (stateful := StatefulConfig.from_config(topology.config)).root)
        except ConfigError as e:
            raise SystemExit(f"executor {self.container}: topology '{self.topology}': {e}") from None
        sweep_container_temp_files(workdir, None if stateful.storage == "redis" else ckpt_root / self.topology,
                                   self.wall(), self.log)
        self.fork_server = bool(FORK_SERVER.parse(topology.config))
        if not self.fork_server and self.zygote is not None:
            self.zygote.stop()
            self.zygote = None
        self._runs_master = self.container == 0
        if self.container == 0:
            self.children.append(Child("tmanager", [py, "-m", "topology_master", *common, *home, *daemon,
                                                    *stateargs],
                                       logs / "tmanager.log"))
        standby = str(topology.config.get(STANDBY_KEY, "false")).lower() == "true"
        if standby and self.container == packing.num_containers - 1:
            self._runs_master = True
            self.children.append(Child("tmanager-standby", [py, "-m", "topology_master", *common, *home, *daemon,
                                                            *stateargs, "--standby"],
                                       logs / "tmanager-standby.log"))
        self.children.append(Child("metricsmgr", [py, "-m", "metrics_manager", *common, *home, *daemon, *stateargs,
                                                  "--container", str(self.container)], logs / "metricsmgr.log"))
        self.children.append(Child("stmgr", [py, "-m", "stream_manager", *common, *home, *daemon, *stateargs,
                                             "--container", str(self.container),
                                             "--port-file", str(self.port_file)], logs / "stmgr.log"))
        command = TaskCommand(py, tuple(common), self.port_file, self.package_dir, self.host, ckpt_root, self.container,
                              tuple(link_args), logs)
        for t in packing.tasks_in(self.container):
            self.children.append(command.child(t, topology))
        # every update repacks with kept tasks in place (planner.packing.repack): a task id
        # never moves to another container, so following the stored packing never runs one twice
        self.rescaler = TaskRescaler(self, secret, command, every_s=self.reconcile_every_s,
                                     grace_s=self.task_stop_grace_s)

    def log_files(self) -> list[Path]:
        """The logs the executor caps: its container's (the children's, the fork server's) and
        its own when the local scheduler made it (a Slurm job's output is Slurm's)."""
        files = logs_in(self.paths.container_logs(self.container))
        own = self.paths.logs / f"executor-{self.container}.log"
        if own.is_file():
            files.append(own)
        return files

    def rotate_logs_if_due(self, now: float) -> None:
        if now < self._next_log_check:
            return
        self._next_log_check = now + self.log_check_s
        rotated, errors = rotate_logs(self.log_files(), self.log_caps)
        for path in rotated:
            self.log.info("rotated %s (over %d bytes; %d old files kept)", path.name, self.log_caps.max_bytes,
                          self.log_caps.keep)
        for line in errors:
            self.log.warning("%s", line)

    def _child_env(self, child: Child) -> dict[str, str]:
        env = self._env()
        if child.alive_file is not None:
            env[ALIVE_ENV] = str(child.alive_file)
        if not child.name.startswith("tmanager"):
            env[EXECUTOR_ENV] = str(os.getpid())  # it stops when this executor is gone
        return env

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        parts = [str(self.package_dir)]
        if env.get("PYTHONPATH"):
            parts.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(parts)
        env["HERON_PY_HOME"] = str(self.paths.home)
        env["PYTHONUNBUFFERED"] = "1"
        # with the topology id (inherited from the scheduler), how a restart finds this
        # container's processes after the executor itself died: they outlive it
        env[CONTAINER_ENV] = str(self.container)
        return env

    def _spawn(self, child: Child) -> None:
        cwd = self.paths.container(self.container)
        if child.alive_file is None:
            alive = self.paths.layout(self.container).alive
            alive.mkdir(mode=0o700, exist_ok=True)
            child.alive_file = alive / child.name
        child.alive_file.unlink(missing_ok=True)  # the last run's touches prove nothing
        forked = self._fork(child, cwd)
        if forked is not None:
            child.proc = forked
        else:
            if child.log_file is None:
                child.log_file = open_log(child.log_path)
            child.proc = subprocess.Popen(child.argv, stdout=child.log_file, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=self._child_env(child), cwd=str(cwd))
        child.started_at = self.clock()
        child.started_wall = self.wall()
        child.restart_at = None
        self.log.info("started %s (pid %d%s)", child.name, child.proc.pid, ", forked" if forked else "")

    def _fork(self, child: Child, cwd: Path) -> ForkedProcess | None:
        """The child forked by the zygote (started, or started again, on first need); None when
        there is no zygote to be had, and the child is then started with Popen."""
        if not self.fork_server or child.argv[1:2] != ["-m"]:
            return None
        if self.zygote is None or not self.zygote.alive:
            self._start_zygote()
        if self.zygote is None:
            return None
        try:
            return self.zygote.spawn(child.argv[2], child.argv[3:], cwd, child.log_path, " ".join(child.argv),
                                     self._child_env(child))
        except ZygoteError as e:
            self.log.warning("the fork server failed to start %s (%s); starting it without", child.name, e)
            self.zygote.stop()
            self.zygote = None
            return None

    def _start_zygote(self) -> None:
        logs = self.paths.container_logs(self.container)
        if self._zygote_log is None:
            self._zygote_log = open_log(logs / "zygote.log")
        try:
            self.zygote = Zygote(self._env(), self.paths.container(self.container), self._zygote_log,
                                 master=self._runs_master, log=self.log)
            self.log.info("fork server started (pid %d)", self.zygote.proc.pid)
        except (ZygoteError, OSError) as e:
            self.log.warning("no fork server (%s): the container's processes start on their own", e)
            self.zygote = None
            self.fork_server = False

    def start(self) -> None:
        # children forked by the zygote become ours once its intermediate process exits
        if self.fork_server and not become_subreaper():
            self.log.warning("cannot become a child subreaper: the container's processes start on their own")
            self.fork_server = False
        # every child's count from the start, at 0, before the metrics manager (a child) reads
        # it: a counter that appears only at its first restart is missed by a dashboard's
        # increase(), which needs a sample before the restart
        self._write_restarts()
        for c in self.children:
            self._spawn(c)

    def supervise_once(self) -> None:
        now = self.clock()
        for c in self.children:
            if c.proc is not None and c.proc.poll() is not None:
                code, pid = c.proc.returncode, c.proc.pid
                uptime = now - c.started_at
                c.backoff = next_backoff(c.backoff, uptime) if c.restarts else BACKOFF_MIN_S
                c.proc = None
                c.restarts += 1
                c.restart_at = now + c.backoff
                self.log.warning("%s exited with code %s after %.1f s; restart %d in %.1f s",
                                 c.name, code, uptime, c.restarts, c.backoff)
                if c.name.startswith("tmanager"):
                    _forget_master(self.state, self.topology, self.host, pid, self.log)
                self._write_restarts()
            elif c.proc is None and c.restart_at is not None and now >= c.restart_at:
                self._spawn(c)
            elif c.proc is not None:
                self._probe(c)
        if self.rescaler is not None:
            self.rescaler.poll(now)
        known = {c.proc.pid for c in self.children if c.proc is not None}
        if self.rescaler is not None:  # the tasks it stops are reaped by its poll, which reads their exit
            known.update(e.proc.pid for e in self.rescaler.ending)
        if self.zygote is not None:
            self.zygote.proc.poll()  # a dead zygote is reaped here, and replaced on next need
            known.add(self.zygote.proc.pid)
        for pid in reap_orphans(known):
            self.log.info("reaped pid %d, an orphan of this container's processes", pid)
        self.rotate_logs_if_due(now)

    def reconcile(self) -> None:
        """Reads the plans (blocking) and starts and stops this container's tasks to follow them (a
        live rescale): TaskRescaler.reconcile. Nothing before prepare() or once stopping."""
        if self.rescaler is not None:
            self.rescaler.reconcile()

    def _probe(self, c: Child) -> None:
        """The liveness probe: a child silent past the timeout is killed (SIGKILL ends a stopped
        process too); the next supervise_once sees it exit and restarts it."""
        if c.alive_file is None or c.proc is None or self.liveness_timeout_s <= 0:
            return
        try:
            mtime: float | None = c.alive_file.stat().st_mtime
        except OSError:
            mtime = None
        silent = silent_for(mtime, c.started_wall, self.wall())
        if silent >= self.liveness_timeout_s:
            self.log.warning("%s (pid %d) stopped answering its liveness probe %.0f s ago (frozen, or its event "
                             "loop is stuck); killing it with SIGKILL to restart it", c.name, c.proc.pid, silent)
            try:
                c.proc.kill()
            except ProcessLookupError:
                pass
            c.started_wall = self.wall()  # one kill per timeout, however long the exit takes to show

    def _write_restarts(self) -> None:
        path = self.paths.layout(self.container).restarts
        # a crash (or a kill -9 of the executor) mid-write must not leave half a document
        atomic_write_text(path, json.dumps({c.name: c.restarts for c in self.children}))

    def stop(self, grace_s: float = 5.0, daemons_grace_s: float = DAEMONS_GRACE_S) -> None:
        """Stops the tasks (``grace_s``, then SIGKILL), then the daemons (``daemons_grace_s``), in
        the order of stop_waves: within ``kill``'s 10 s wait for the executor."""
        self.stopping = True
        tasks, daemons = stop_waves(self.children)
        # the tasks a rescale is stopping end with the others (a second SIGTERM only sets the
        # same flag again)
        if self.rescaler is not None:
            tasks += [e.child for e in self.rescaler.ending]
            self.rescaler.ending = []
        for wave, grace in ((tasks, grace_s), (daemons, daemons_grace_s)):
            procs = [c.proc for c in wave if c.proc is not None]
            self.log.info("stopping %s", ", ".join(c.name for c in wave if c.proc is not None) or "nothing")
            _terminate_all(procs, grace)
        for c in tasks + daemons:
            if c.log_file is not None:
                c.log_file.close()
        if self.zygote is not None:
            self.zygote.stop()
            self.zygote = None
        if self._zygote_log is not None:
            self._zygote_log.close()


def _forget_master(state: StateManager, topology: str, host: str, pid: int, log: logging.Logger) -> None:
    """Removes the location a master of this container left behind when it exited without
    releasing it (killed, crashed): until a new master claims it, the state store would send the
    CLI to a port any local process may bind. From a thread, since a ZooKeeper call may block,
    and supervision must go on."""

    def forget() -> None:
        try:
            if state.forget_tmanager(topology, host, pid):
                log.info("removed the topology master's location (pid %d exited without releasing it)", pid)
        except Exception as e:  # a failure here must reach the log, not end supervision
            log.warning("cannot remove the location of the exited topology master (pid %d): %s", pid, e)

    threading.Thread(target=forget, name="forget-master", daemon=True).start()


def _terminate_all(procs: Sequence[subprocess.Popen[bytes] | ForkedProcess], grace_s: float) -> None:
    """SIGTERM to all (and SIGCONT: a stopped child handles its SIGTERM only once continued),
    one deadline for all, then SIGKILL for what is left. The children are this process's own, so
    each wait reaps its child as soon as it exits."""
    for p in procs:
        try:
            p.terminate()
            os.kill(p.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace_s
    for p in procs:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _with_room() -> None:
    """Starts this executor again in place (same pid, so the scheduler still tracks it) with
    ROOM characters more command line: the zygote forked from it writes its children's command
    lines there (zygote.set_cmdline). Started so already, or without /proc: nothing to do."""
    if ROOM_FLAG in sys.argv or not os.path.exists("/proc/self/stat"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [*sys.orig_argv, ROOM_FLAG, "." * ROOM])


def _early_zygote(topology: str, container: int, home: Path | None) -> Zygote | None:
    """The fork server, forked from this process while it has one thread (before a state
    manager's client starts its own): None where that cannot be, and the executor then starts
    one with ``python -m`` on first need."""
    if not sys.platform.startswith("linux"):
        return None
    paths = TopologyPaths.of(topology, home)
    try:
        private_home(home)  # the folders below are made only in a home that is this user's
        logs = paths.private(paths.container_logs(container))
        return Zygote.forked(master=container == 0, log_path=logs / "zygote.log",
                             log=logging.getLogger("heron_py.executor"))
    except (OSError, ZygoteError, StateManagerError) as e:
        print(f"executor {container}: no early fork server ({e})", file=sys.stderr)
        return None


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        _with_room()
    ap = argparse.ArgumentParser(prog="heron_py.scheduler.executor")
    ap.add_argument("--topology", required=True)
    ap.add_argument("--container", type=int, required=True)
    ap.add_argument("--home", type=Path, default=None)
    ap.add_argument("--host", default="127.0.0.1",
                    help="the address the container's daemons bind and advertise; auto: the address of "
                         "the interface toward ZooKeeper")
    ap.add_argument(ROOM_FLAG, default="", help=argparse.SUPPRESS)
    statecfg.add_arguments(ap)
    args = ap.parse_args(argv)
    if args.room:  # ps shows the command line the scheduler gave, not the room
        given = sys.orig_argv[:sys.orig_argv.index(ROOM_FLAG)]
        set_cmdline(" ".join([sys.executable, *given[1:]]))
    zygote = _early_zygote(args.topology, args.container, args.home) if args.room else None
    log = setup_logging(f"executor[{args.container}]")
    state_config = statecfg.resolve(args, home=args.home)
    try:
        host = resolve_host(args.host, state_config)
    except HostError as e:
        log.error("%s", e)
        if zygote is not None:
            zygote.stop()
        return 2
    log.info("container %d binds and advertises %s", args.container, host)
    try:
        ex = Executor(topology=args.topology, container=args.container, home=args.home, log=log,
                      state_config=state_config, host=host, zygote=zygote)
    except StateManagerError as e:
        if zygote is not None:
            zygote.stop()
        # e.g. a ZooKeeper this node cannot reach: said here, in the container's log; the
        # container then shows as not running in heron-py status
        log.error("container %d cannot start: %s", args.container, e)
        return 2
    signals = StopSignals()
    ex.prepare()
    ex.start()
    while not signals.requested:
        ex.supervise_once()
        time.sleep(0.1)
    log.info("stopping container %d", args.container)
    ex.stop()
    ex.state.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

