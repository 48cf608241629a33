"""The one in-process runner: a topology's tasks in this process, each the engine's own component
host, on an ``InProcessWire``; batches delivered, spouts called, time fired.

``run_in_process``, ``heron-py run`` and the ``Harness`` all run on it. What differs between them
is given as ``RunOptions``, each choice explicit:

- the clock: a manual clock a test moves (``manual_clock``: components' own wall clocks read it;
  message timeouts are checked at every firing, so a tree times out exactly at its deadline,
  which ``Timers.next_event`` names), or the wall clock (message timeouts checked every
  ``EXPIRE_EVERY_S`` by the tracker and each spout's task, the instance's own period);
- the reliability (``Acking``): at most once, nothing tracks trees and the wire drops acks; at
  least once, the stream managers' XOR tracker on the run's clock (``ClockedTracker``), whose
  ACK_RESULT frames go back to the spouts, which call ``ack``/``fail``;
- effectively once (``EffectivelyOnce``): each task's ``StatefulTask`` (the instance's own code)
  and the master's checkpoint rules (``heron_py.testing.master``: the real
  ``CheckpointCoordinator``) rolling every task back after a crash;
- pollable components (``poll``): components with input of their own (``heron_poll``: shell
  components and their subprocesses) polled with every delivery; ``settle`` waits, on the wall
  clock, until none is busy (``heron_busy``);
- routing (``route_at_once``): a task's frames routed from its sink at once (a bolt later in a
  round takes what an earlier one emitted), or between calls (a master must not be re-entered
  while a task is mid-call);
- what a runner watches: an ``observer`` per task (what it receives: capture, counting), and
  ``on_start`` after each (re)initialize of a component (a harness's fault guards).

``Tasks`` makes, restarts and commands the tasks; ``Runner`` moves tuples and calls the spouts;
``Timers`` fires what is due on the clock. A task that dies (``TaskKilled``) is recovered as
Heron recovers it: alone, or with every task rolled back effectively once.
"""

from __future__ import annotations

import collections
import logging
import random
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

from google.protobuf.message import Message

from heron_py.acking.tracker import ClockedTracker
from heron_py.checkpoint.coordinator import CheckpointCoordinator, CoordinatorConfig
from heron_py.checkpoint.storage import CheckpointStorage
from heron_py.common.config import ReliabilityConfig, StatefulConfig
from heron_py.common.framing import MsgType, frame_type
from heron_py.planner.model import PhysicalPlan, TopologyDef
from heron_py.runtime.host import BoltHost, ComponentHost, HostOptions, Observer, SpoutHost, make_host
from heron_py.runtime.stateful import StatefulTask
from heron_py.testing.master import Record, SimulatedMaster
from heron_py.testing.source import TaskKilled
from heron_py.testing.wire import InProcessWire

LOG = logging.getLogger("heron_py.testing.runner")
EXPIRE_EVERY_S = 1.0  # on the wall clock: how often trees past the message timeout fail (the instance's period)
H = TypeVar("H", bound=ComponentHost)


@dataclass(frozen=True)
class Acking:
    """What the hosts are told of acking, and what tracks the trees (None: at most once, nothing)."""

    config: ReliabilityConfig = field(default_factory=ReliabilityConfig)
    tracker: ClockedTracker | None = None

    @classmethod
    def of(cls, topology: TopologyDef, clock: Callable[[], float]) -> Acking:
        """The topology's own mode: at least once, the stream managers' XOR tracker on ``clock``."""
        config = ReliabilityConfig.from_config(topology.config)
        return cls(config, ClockedTracker(config.timeout_s, clock) if config.acking else None)


@dataclass(frozen=True)
class EffectivelyOnce:
    """Checkpoints into ``storage``, the master writing what completed and what rolled back into ``record``."""

    storage: CheckpointStorage
    record: Record


@dataclass
class Task:
    """One task of the plan: its host now (a restart makes a new one), its stateful side
    (effectively once), the tuples it received across restarts and its next tick."""

    task_id: int
    component: str
    index: int  # within its component
    host: ComponentHost
    rt: StatefulTask | None = None
    received: int = 0
    next_tick: float | None = None


def _unobserved(task: int, component: str) -> Observer | None:
    return None


def _ignore(_: Any) -> None:
    pass


@dataclass(frozen=True)
class RunOptions:
    """What a run differs in (see the module's docstring)."""

    clock: Callable[[], float] = time.monotonic
    manual_clock: bool = False
    acking: Acking = field(default_factory=Acking)
    effectively_once: EffectivelyOnce | None = None
    poll: bool = False
    route_at_once: bool = False
    observer: Callable[[int, str], Observer | None] = _unobserved  # (task, component) -> what it receives
    on_start: Callable[[Task], None] = _ignore  # after each (re)initialize of a task's component
    on_kill: Callable[[str], None] = _ignore  # a task died: why


class Tasks:
    """Every task of the plan: its host made, (re)started and prepared for the run's clock, and,
    effectively once, the master's commands carried out on all of them (the ``Cluster`` of
    ``heron_py.testing.master``)."""

    def __init__(self, plan: PhysicalPlan, wire: InProcessWire, sink: Callable[[list[bytes]], None],
                 options: RunOptions, rng: random.Random) -> None:
        self._plan = plan
        self._wire = wire
        self._sink = sink
        self._options = options
        self._rng = rng
        eo = options.effectively_once
        self._stateful = StatefulConfig.from_config(plan.topology.config) if eo is not None else None
        self._fresh: dict[int, Task] = {}  # restored for the first time: activated when processing starts
        self.tasks: dict[int, Task] = {}
        index: dict[str, int] = collections.Counter()
        for t in plan.packing.tasks:
            task = Task(t.task_id, t.component, index[t.component], self._new_host(t.task_id))
            index[t.component] += 1
            self.tasks[t.task_id] = task
            if self._stateful is not None:
                task.rt = self._new_rt(task.host)

    def start_all(self) -> None:
        """Not effectively once: every task initializes, then every task activates (effectively
        once, the master's first restore does it)."""
        for task in self.tasks.values():
            self._initialize(task)
        for task in self.tasks.values():
            task.host.start()

    def replace(self, task_id: int) -> None:
        """The process of ``task_id`` died: a new host, whose emitted but unsent frames are gone
        with the old one; a new component, started at once unless the master restores it."""
        task = self.tasks[task_id]
        task.host.emitter.discard()
        task.host = self._new_host(task_id)
        if self._stateful is not None:
            task.rt = self._new_rt(task.host)
        else:
            self._initialize(task)
            task.host.start()

    # --- the master's commands (effectively once) ---
    def start_checkpoint(self, checkpoint_id: int) -> None:
        for task in self.tasks.values():
            if task.rt is not None and task.host.is_spout:
                task.rt.start_checkpoint(checkpoint_id)

    def restore(self, restore_id: int, checkpoint_id: int) -> None:
        self._wire.clear()  # the old run's frames
        for task in self.tasks.values():
            assert task.rt is not None
            if not task.rt.initialized:
                self._fresh[task.task_id] = task
            self._prepare(task.host)
            task.rt.restore(restore_id, checkpoint_id)
            self._instrument(task)

    def start_processing(self, restore_id: int) -> None:
        for task in self.tasks.values():
            assert task.rt is not None
            task.rt.start_processing(restore_id)
        for task in self._fresh.values():
            task.host.start()
        self._fresh.clear()

    def committed(self, checkpoint_id: int) -> None:
        for task in self.tasks.values():  # sinks and spouts commit what they staged for it
            if task.rt is not None:
                task.rt.checkpoint_committed(checkpoint_id)

    def pending_ids(self) -> list[Any]:
        """The message ids the spouts emitted whose trees are still in flight."""
        out: list[Any] = []
        for task in self.tasks.values():
            rel = task.host.reliability
            if task.host.is_spout and rel is not None:
                out.extend(tup_id for tup_id, _ in rel.pending.values())
        return out

    # --- making a task ---
    def _new_host(self, task_id: int) -> ComponentHost:
        o = self._options
        observer = o.observer(task_id, self._plan.task(task_id).component)
        options = HostOptions(reliability=o.acking.config, observer=observer, rng=random.Random(self._rng.random()),
                              clock=o.clock)
        return make_host(self._plan, task_id, self._sink, options)

    def _new_rt(self, host: ComponentHost) -> StatefulTask:
        eo = self._options.effectively_once
        assert self._stateful is not None and eo is not None
        return StatefulTask(host, eo.storage, self._plan.topology.name, self._sink,
                            align_bytes=self._stateful.align_bytes, log=LOG, clock=self._options.clock)

    def _initialize(self, task: Task) -> None:
        """A task's start or restart when the master does not restore it: its component initializes."""
        self._prepare(task.host)
        task.host.initialize()
        self._instrument(task)

    def _prepare(self, host: ComponentHost) -> None:
        # on a manual clock, a component with heronpy's window bolts' clock (time.time as an
        # attribute) reads the run's
        if self._options.manual_clock and getattr(type(host.user), "clock", None) in (time.time, time.monotonic):
            host.user.clock = self._options.clock

    def _instrument(self, task: Task) -> None:
        """After (re)initialize: the first tick scheduled, and what the runner watches of it."""
        host = task.host
        self._prepare(host)
        if isinstance(host, BoltHost):
            task.next_tick = self._options.clock() + host.tick_s if host.tick_s else None
        self._options.on_start(task)


def _no_master(msg: Message) -> None:
    raise AssertionError(f"the in-process run has no handler for a task's {type(msg).__name__} "
                         f"(no master: not effectively once)")


class Runner:
    """Moves tuples: frames through the wire, acks through the tracker, results back to the
    spouts, every batch to its task; calls the spouts; recovers a task that dies."""

    def __init__(self, plan: PhysicalPlan, options: RunOptions, rng: random.Random) -> None:
        topo = plan.topology
        eo = options.effectively_once
        # effectively once, a task's report reaches the master, which commands every task: never mid-call
        assert eo is None or not options.route_at_once, "effectively once routes between calls"
        self.options = options
        self.tracker = options.acking.tracker
        self.wire = InProcessWire((t.task_id for t in plan.packing.tasks),
                                  on_acks=self.tracker.on_ack_batch if self.tracker is not None else None)
        self.tasks = Tasks(plan, self.wire, self._send_routed if options.route_at_once else self.wire.send,
                           options, rng)
        self.master: SimulatedMaster | None = None
        if eo is not None:
            coordinator = CheckpointCoordinator(CoordinatorConfig.from_config(topo.config),
                                                {t.task_id: t.component for t in plan.packing.tasks},
                                                eo.storage.completed_ids(topo.name))
            self.master = SimulatedMaster(coordinator, eo.storage, topo.name, self.tasks, eo.record, options.clock)
        self._on_report = self.master.on_message if self.master is not None else _no_master
        self.timers = Timers(self.tasks, self.tracker, self.master, options)
        self.spout_calls = 0

    def start(self) -> None:
        """The topology starts: effectively once, the master's first restore (every task then
        processes); else every task initializes and activates."""
        if self.master is not None:
            self.master.start()
            self.route()  # the first restore's reports: every task processes
        else:
            self.tasks.start_all()

    @property
    def pollable(self) -> list[ComponentHost]:
        """The hosts polled with every delivery (none unless ``poll``)."""
        if not self.options.poll:
            return []
        return [t.host for t in self.tasks.tasks.values() if t.host.poll_s is not None]

    def hosts(self, kind: type[H]) -> list[H]:
        """The tasks' hosts of one kind (SpoutHost, BoltHost), in task order."""
        return [h for t in self.tasks.tasks.values() if isinstance(h := t.host, kind)]

    def route(self) -> bool:
        """Every frame on the wire to its place (a report to the master); True if any."""
        return self.wire.route(self._on_report)

    def drain(self) -> bool:
        """Poll, flush, route and deliver (batches, and trees' results to their spouts) until
        nothing is left; True if anything moved."""
        moved = False
        tasks = self.tasks.tasks
        while True:
            for h in self.pollable:
                h.poll()
            for task in list(tasks.values()):
                task.host.flush()
            busy = self.route()
            busy = self._deliver_results() or busy
            for task in list(tasks.values()):
                box = self.wire.inboxes[task.task_id]
                while box:
                    busy = True
                    frame = box.popleft()
                    try:
                        _deliver(task, frame)
                    except TaskKilled as killed:
                        self._crash(killed)
                        break
            if not busy:
                return moved
            moved = True

    def call_spouts(self, tries: int, skip: Collection[int] = ()) -> dict[int, bool]:
        """Calls each spout task that processes (not in ``skip``) until it emits, at most
        ``tries`` times; whether it emitted, per task called. A task that dies in the call is
        recovered, and counts as moved."""
        out: dict[int, bool] = {}
        for task in list(self.tasks.tasks.values()):
            host = task.host
            if (not isinstance(host, SpoutHost) or task.task_id in skip
                    or (task.rt is not None and not task.rt.processing)):
                continue
            emitted = False
            for _ in range(tries):
                self.spout_calls += 1
                try:
                    n = host.next_tuples(1)
                except TaskKilled as killed:
                    self._crash(killed)
                    emitted = True
                    break
                host.acks_due()  # trees that completed at emit (no consumer took a copy)
                if n:
                    emitted = True
                    break
            out[task.task_id] = emitted
        return out

    def quiesce(self, idle_calls: int, max_calls: int) -> None:
        """Until a round where no spout emits (each called up to ``idle_calls`` times) and
        nothing moves, or ``max_calls`` spout calls: each round delivers everything first."""
        start = self.spout_calls
        while True:
            moved = self.drain()
            emitted = any(self.call_spouts(idle_calls).values())
            if not emitted and not moved:
                return
            if self.spout_calls - start >= max_calls:
                self.drain()
                return

    def until_idle(self, idle_calls: int, max_calls: int) -> None:
        """Calls the spouts in turn, once each a round, until each emitted nothing ``idle_calls``
        times in a row (or ``max_calls`` calls in all), delivering every thousand calls (batches
        fill as they would on a busy instance) and at the end."""
        start = self.spout_calls
        idle = {sp.task_id: 0 for sp in self.hosts(SpoutHost)}
        while self.spout_calls - start < max_calls and any(i < idle_calls for i in idle.values()):
            quiet = {t for t, i in idle.items() if i >= idle_calls}
            for t, emitted in self.call_spouts(1, quiet).items():
                idle[t] = 0 if emitted else idle[t] + 1
            if (self.spout_calls - start) % 1000 == 0:
                self.drain()
        self.drain()

    def settle(self, timeout_s: float) -> list[str]:
        """Polls and delivers until no pollable component is busy and nothing more moves (a
        subprocess answers in its own time: the wall clock); the components still busy after
        ``timeout_s`` (none: settled)."""
        deadline = time.monotonic() + timeout_s
        while pollable := self.pollable:
            moved = self.drain()
            waiting = [h.component for h in pollable if _busy(h)]
            if not waiting and not moved:
                break
            if time.monotonic() > deadline:
                return sorted(set(waiting))
            time.sleep(0.001)
        return []

    def close(self, *, spouts: bool = True, on_error: Callable[[str, Exception], None] | None = None) -> None:
        """A graceful end, as a killed topology's tasks get: each closes (with ``spouts`` the
        spouts too), in task order, what their cleanup emits (a keyed aggregation in "final"
        mode) is delivered, and the pollable components close last, so no subprocess outlives
        the run. ``on_error``: a close that raises is reported there and the others still run
        (else it raises)."""
        pollable = self.pollable
        for task in list(self.tasks.tasks.values()):
            host = task.host
            if host not in pollable and (spouts or not host.is_spout):
                _attempt(f"closing {host.component}-{host.task_id}", host.close, on_error)
        _attempt("delivering what closing emitted", self.drain, on_error)
        for h in pollable:
            _attempt(f"closing {h.component}-{h.task_id}", h.close, on_error)

    def _send_routed(self, frames: list[bytes]) -> None:
        # routed at once: a bolt later in this round may take what an earlier one emitted
        self.wire.send(frames)
        self.route()

    def _crash(self, killed: TaskKilled) -> None:
        """A task died: Heron's recovery. At least once (or at most once) the task alone restarts,
        with what it had not sent lost; effectively once the master rolls every task back."""
        self.options.on_kill(str(killed))
        LOG.info("%s", killed)
        self.tasks.replace(killed.task_id)
        if self.master is not None:
            self.master.on_failure(str(killed))
            self.route()  # the restored tasks' reports: every task processes again before the run goes on

    def _deliver_results(self) -> bool:
        results = self.tracker.take_results() if self.tracker is not None else {}
        for spout_task, frame in results.items():
            host = self.tasks.tasks[spout_task].host
            assert isinstance(host, SpoutHost)
            host.on_results(frame)
        return bool(results)


class Timers:
    """What is due on the run's clock: the bolts' ticks, message timeouts, and the master's
    checkpoints and timeouts (effectively once)."""

    def __init__(self, tasks: Tasks, tracker: ClockedTracker | None, master: SimulatedMaster | None,
                 options: RunOptions) -> None:
        self._tasks = tasks
        self._tracker = tracker
        self._master = master
        self._clock = options.clock
        self._manual = options.manual_clock
        self._next_expire = self._clock() + EXPIRE_EVERY_S

    def fire_due(self) -> bool:
        """Fires everything due now; True if a bolt ticked."""
        now = self._clock()
        self._expire(now)
        ticked = False
        for task in list(self._tasks.tasks.values()):
            host = task.host
            if task.next_tick is not None and task.next_tick <= now and isinstance(host, BoltHost):
                if task.rt is None or task.rt.processing:
                    host.tick()
                    ticked = True
                tick_s = host.tick_s or 0.0
                task.next_tick += tick_s
                if task.next_tick <= now:  # late by more than a period: one tick, as the instance's loop
                    task.next_tick = now + tick_s
        if self._master is not None:
            self._master.tick()
        return ticked

    def next_event(self) -> float | None:
        """When, on the clock, something is next due (None: nothing waits on the clock)."""
        due = [t.next_tick for t in self._tasks.tasks.values() if t.next_tick is not None]
        deadline = self._tracker.next_deadline() if self._tracker is not None else None
        if deadline is not None:
            due.append(deadline)
        wake = self._master.next_wake() if self._master is not None else None
        if wake is not None:
            due.append(wake)
        return min(due) if due else None

    def _expire(self, now: float) -> None:
        """Trees past the message timeout fail. On a manual clock the tracker is asked at each
        firing (its deadline is an event); on the wall clock every ``EXPIRE_EVERY_S``, and each
        spout's own task too, as the stream manager and the instance fail them."""
        if self._manual:
            if self._tracker is not None:
                self._tracker.expire()
        elif self._tracker is not None and now >= self._next_expire:
            self._next_expire = now + EXPIRE_EVERY_S
            self._tracker.expire()
            for task in self._tasks.tasks.values():
                if isinstance(task.host, SpoutHost):
                    task.host.expire()


def _deliver(task: Task, frame: bytes) -> None:
    if task.rt is None:
        host = task.host
        assert isinstance(host, BoltHost)
        host.process_frame(frame)
    elif frame_type(frame) == MsgType.CKPT_MARKER:
        task.rt.on_marker(frame)
    else:
        task.rt.on_batch(frame)


def _busy(host: ComponentHost) -> bool:
    busy = getattr(host.user, "heron_busy", None)  # contract: api/contracts.py BusyComponent
    return bool(busy()) if callable(busy) else False


def _attempt(what: str, call: Callable[[], object], on_error: Callable[[str, Exception], None] | None) -> None:
    if on_error is None:
        call()
        return
    try:
        call()
    except Exception as e:  # one component's close must not hide the others' or the run's end
        on_error(what, e)
