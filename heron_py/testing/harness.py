"""``Harness``: a topology in this process with fault and time control, for users' tests.

Every task is the engine's own component host (routing, groupings, batching, anchoring), driven
here in place of the instance, the stream manager and the master:

- the wire (``heron_py.testing.wire``): frames routed on their header as the stream managers
  route them, the tasks' reports decoded by the daemons' message registry;
- acking (at least once): the stream managers' XOR tracker (``heron_py.acking.tracker``), run
  here on the harness's clock (``ClockedTracker``: a root times out at exactly the message
  timeout); ACK_RESULT frames go back to the spouts' hosts, which call ``ack``/``fail``;
- effectively once: each task's ``StatefulTask`` (the instance's own code), checkpoints into an
  in-memory storage, markers routed behind the tuples, and the master's own checkpoint rules
  (``heron_py.testing.master``: the real ``CheckpointCoordinator``, with its timeouts, failure
  count and restore fallbacks) rolling every task back after a crash;
- time: one manual clock (``advance``); ticks, window bolts' clocks, message timeouts and
  checkpoint intervals read it, never the wall clock;
- faults (``heron_py.testing.faults``): ``kill_at`` (a bolt task dies at its Nth tuple),
  ``fail_at`` (a bolt fails a tuple instead of processing it), and ``TestSource``'s ``ABORT``
  marker (a spout task dies there).

In this module: ``_TaskSet`` makes, restarts and commands the tasks; ``_Loop`` moves tuples and
time; ``Harness`` is the API over them. Nothing here sleeps or opens a socket: a run is
deterministic for its seed.
"""

from __future__ import annotations

import collections
import logging
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from heron_py.acking.tracker import ClockedTracker
from heron_py.checkpoint.coordinator import CheckpointCoordinator, CoordinatorConfig
from heron_py.checkpoint.storage import (
    DEFAULT_KEEP_LAST,
    CheckpointStorage,
    IncompleteCheckpointError,
    Marker,
)
from heron_py.common.config import ReliabilityConfig, StatefulConfig, effectively_once
from heron_py.common.framing import MsgType, frame_type
from heron_py.planner.model import PhysicalPlan, TopologyDef
from heron_py.runtime.host import BoltHost, ComponentHost, HostOptions, SpoutHost, make_host
from heron_py.runtime.stateful import StatefulTask
from heron_py.testing.faults import Faults
from heron_py.testing.inprocess import InProcessResult, capture_observer, in_process_plan, load_topology
from heron_py.testing.master import SimulatedMaster
from heron_py.testing.source import SourceLedger, TaskKilled, TestSource, set_active_ledgers
from heron_py.testing.wire import InProcessWire

LOG = logging.getLogger("heron_py.testing.harness")
START_TIME = 1_000_000.0  # the clock's first reading: a fixed epoch, so window bounds repeat


class ManualClock:
    """The harness's clock: it moves only when told to. Also a clock to inject into code under
    test (``clock()`` reads it; ``advance`` and ``sleep`` move it; ``sleep`` stands in for the
    injected sleep of code that polls, so a test waits for nothing)."""

    def __init__(self, start: float = START_TIME) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t

    @property
    def now(self) -> float:
        return self.t

    @now.setter
    def now(self, value: float) -> None:
        self.t = value

    def advance(self, seconds: float) -> None:
        self.t += seconds

    def sleep(self, seconds: float) -> None:
        self.t += seconds


class MemoryStorage(CheckpointStorage):
    """Checkpoints in a dict: the effectively-once harness needs no files."""

    def __init__(self) -> None:
        self._data: dict[tuple[str, int], dict[int, bytes]] = {}
        self._complete: dict[tuple[str, int], Marker] = {}

    def save(self, topology: str, checkpoint_id: int, task_id: int, data: bytes) -> None:
        self._data.setdefault((topology, checkpoint_id), {})[task_id] = data

    def mark_complete(self, topology: str, checkpoint_id: int, stored: Iterable[int],
                      packing: Mapping[str, Sequence[int]]) -> None:
        saved = self._data.setdefault((topology, checkpoint_id), {})
        tasks = frozenset(stored)
        missing = sorted(tasks - set(saved))
        if missing:
            raise IncompleteCheckpointError(f"checkpoint {checkpoint_id} of '{topology}': cannot mark complete, "
                                            f"task(s) {missing} reported saving state but have none")
        self._complete[(topology, checkpoint_id)] = Marker(tasks, {c: tuple(t) for c, t in packing.items()})

    def marker(self, topology: str, checkpoint_id: int) -> Marker:
        marker = self._complete.get((topology, checkpoint_id))
        if marker is None:
            raise IncompleteCheckpointError(f"checkpoint {checkpoint_id} of '{topology}' is not complete")
        return marker

    def load(self, topology: str, checkpoint_id: int, task_id: int) -> bytes | None:
        if task_id not in self.marker(topology, checkpoint_id).tasks:
            return None
        return self._data[(topology, checkpoint_id)].get(task_id)

    def completed_ids(self, topology: str) -> list[int]:
        return sorted(c for t, c in self._complete if t == topology)

    def checkpoint_ids(self, topology: str) -> list[int]:
        return sorted(c for t, c in self._data if t == topology)

    def gc(self, topology: str, keep_last: int = DEFAULT_KEEP_LAST, protect: Iterable[int] = ()) -> list[int]:
        return []  # a test run is short: every checkpoint stays, for the test to look at

    def remove(self, topology: str, checkpoint_ids: list[int]) -> None:
        for c in checkpoint_ids:
            self._data.pop((topology, c), None)
            self._complete.pop((topology, c), None)

    def delete_topology(self, topology: str) -> None:
        for key in [k for k in self._data if k[0] == topology]:
            del self._data[key]
            self._complete.pop(key, None)


@dataclass(frozen=True)
class Outcome:
    """One ``ack``/``fail`` call a spout got: which task, which message id, which kind."""

    component: str
    task: int
    msg_id: Any
    kind: str  # "ack" or "fail"


@dataclass
class HarnessResult(InProcessResult):
    """What a harness run saw. ``acked`` and ``failed`` count the spouts' ``ack``/``fail`` calls
    per message id (a timed-out tuple is failed, as in Storm); ``pending`` lists the message ids
    still in flight at the last harness call; ``kills`` says which tasks died and why."""

    acked: collections.Counter[Any] = field(default_factory=collections.Counter)
    failed: collections.Counter[Any] = field(default_factory=collections.Counter)
    pending: list[Any] = field(default_factory=list)
    outcomes: list[Outcome] = field(default_factory=list)
    kills: list[str] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)  # completed, oldest first
    restores: list[int] = field(default_factory=list)  # the checkpoint each rollback loaded (0: clean)


@dataclass
class _Task:
    task_id: int
    component: str
    index: int  # within its component
    host: ComponentHost
    rt: StatefulTask | None = None
    received: int = 0  # tuples, across restarts
    next_tick: float | None = None


class _TaskSet:
    """Every task of the plan: its host made, (re)started and instrumented (the harness's clock,
    the faults' guards, the spouts' outcomes recorded), and, effectively once, the master's
    commands carried out on all of them (the ``Cluster`` of ``heron_py.testing.master``)."""

    def __init__(self, plan: PhysicalPlan, wire: InProcessWire, faults: Faults, result: HarnessResult,
                 clock: ManualClock, rng: random.Random, reliability: ReliabilityConfig,
                 stateful: StatefulConfig | None, storage: CheckpointStorage) -> None:
        self._plan = plan
        self._wire = wire
        self._faults = faults
        self._result = result
        self._clock = clock
        self._rng = rng
        self._reliability = reliability
        self._stateful = stateful  # None: not effectively once
        self._storage = storage
        self.ledgers: dict[tuple[str, int], SourceLedger] = {}
        self._fresh: dict[int, _Task] = {}  # restored for the first time: activated when processing starts
        self.tasks: dict[int, _Task] = {}
        index: dict[str, int] = collections.Counter()
        for t in plan.packing.tasks:
            task = _Task(t.task_id, t.component, index[t.component], self._new_host(t.task_id))
            index[t.component] += 1
            self.tasks[t.task_id] = task
            if stateful is not None:
                task.rt = self._new_rt(task.host)

    def start_all(self) -> None:
        """Not effectively once: every task initializes and activates now (effectively once,
        the master's first restore does it)."""
        for task in self.tasks.values():
            self._start(task)

    def replace(self, task_id: int) -> None:
        """The process of ``task_id`` died: a new host, whose emitted but unsent frames are gone
        with the old one; a new component, started at once unless the master restores it."""
        task = self.tasks[task_id]
        task.host.emitter.discard()
        task.host = self._new_host(task_id)
        if self._stateful is not None:
            task.rt = self._new_rt(task.host)
        else:
            self._start(task)

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

    # --- what the result reads ---
    def pending_ids(self) -> list[Any]:
        out: list[Any] = []
        for task in self.tasks.values():
            rel = task.host.reliability
            if task.host.is_spout and rel is not None:
                out.extend(tup_id for tup_id, _ in rel.pending.values())
        return out

    def sources_not_done(self) -> list[str]:
        # a source held at PAUSE waits for the test's next advance, not for complete()
        return [f"{t.component}[{t.index}]" for t in self.tasks.values()
                if isinstance(t.host.user, TestSource) and not t.host.user.done and not t.host.user.paused]

    # --- making a task ---
    def _new_host(self, task_id: int) -> ComponentHost:
        component = self._plan.task(task_id).component
        options = HostOptions(reliability=self._reliability,
                              observer=capture_observer(self._result.received, task_id, component),
                              rng=random.Random(self._rng.random()), clock=self._clock)
        self.ledgers.setdefault((component, task_id), SourceLedger(acking=self._reliability.acking, clock=self._clock))
        return make_host(self._plan, task_id, self._wire.send, options)

    def _new_rt(self, host: ComponentHost) -> StatefulTask:
        assert self._stateful is not None
        return StatefulTask(host, self._storage, self._plan.topology.name, self._wire.send,
                            align_bytes=self._stateful.align_bytes, log=LOG, clock=self._clock)

    def _start(self, task: _Task) -> None:
        """A task's start or restart when the master does not restore it: initialize, activate."""
        self._prepare(task.host)
        task.host.initialize()
        self._instrument(task)
        task.host.start()

    def _prepare(self, host: ComponentHost) -> None:
        # a component with heronpy's window bolts' clock (time.time as an attribute) reads ours
        if getattr(type(host.user), "clock", None) in (time.time, time.monotonic):
            host.user.clock = self._clock

    def _instrument(self, task: _Task) -> None:
        """After (re)initialize: the faults' guards around process(), the spout's outcomes
        recorded, the first tick scheduled."""
        host = task.host
        self._prepare(host)
        self._result.components[task.task_id] = host.user
        if isinstance(host, BoltHost):
            self._faults.guard(task, host)
            task.next_tick = self._clock() + host.tick_s if host.tick_s else None
        elif isinstance(host, SpoutHost):
            _record_outcomes(task, host, self._result)


def _record_outcomes(task: _Task, host: SpoutHost, result: HarnessResult) -> None:
    """The spout's ``ack`` and ``fail`` calls, counted and listed in ``result`` before its own."""
    user = host.user
    ack, fail = user.ack, user.fail

    def recorded_ack(tup_id: Any) -> None:
        result.acked[tup_id] += 1
        result.outcomes.append(Outcome(task.component, task.task_id, tup_id, "ack"))
        ack(tup_id)

    def recorded_fail(tup_id: Any) -> None:
        result.failed[tup_id] += 1
        result.outcomes.append(Outcome(task.component, task.task_id, tup_id, "fail"))
        fail(tup_id)

    user.ack, user.fail = recorded_ack, recorded_fail


def _no_master(msg: Message) -> None:
    raise AssertionError(f"the harness has no handler for a task's {type(msg).__name__}")


class _Loop:
    """Moves tuples and time: frames through the wire, acks through the tracker, spouts called
    until nothing moves, and what is due on the clock (ticks, message timeouts, the master's
    checkpoints and timeouts) fired in time order. A task that dies is recovered here."""

    def __init__(self, tasks: _TaskSet, wire: InProcessWire, tracker: ClockedTracker,
                 master: SimulatedMaster | None, result: HarnessResult, clock: ManualClock, *,
                 idle_calls: int, max_spout_calls: int) -> None:
        self._tasks = tasks
        self._wire = wire
        self._tracker = tracker
        self._master = master  # None: not effectively once
        self._on_report = master.on_message if master is not None else _no_master
        self._result = result
        self._clock = clock
        self._idle_calls = idle_calls
        self._max_spout_calls = max_spout_calls

    def route(self) -> bool:
        """Every frame on the wire to its place (a report to the master); True if any."""
        return self._wire.route(self._on_report)

    def crash(self, killed: TaskKilled) -> None:
        """A task died: Heron's recovery. At least once (or at most once) the task alone restarts,
        with what it had not sent lost; effectively once the master rolls every task back."""
        self._result.kills.append(str(killed))
        LOG.info("%s", killed)
        self._tasks.replace(killed.task_id)
        if self._master is not None:
            self._master.on_failure(str(killed))
            self.route()  # the restored tasks' reports: every task processes again before the run goes on

    def drain(self) -> bool:
        """Flush, route and deliver until nothing is left; True if anything moved."""
        moved = False
        tasks = self._tasks.tasks
        while True:
            for task in list(tasks.values()):
                task.host.flush()
            busy = self.route()
            busy = self._deliver_results() or busy
            for task in list(tasks.values()):
                box = self._wire.inboxes[task.task_id]
                while box:
                    busy = True
                    frame = box.popleft()
                    try:
                        self._deliver(task, frame)
                    except TaskKilled as killed:
                        self.crash(killed)
                        break
            if not busy:
                return moved
            moved = True

    def quiesce(self) -> None:
        """Spouts emit and batches move until a round where no spout emits and nothing moves."""
        calls = 0
        while True:
            moved = self.drain()
            emitted = False
            for task in list(self._tasks.tasks.values()):
                host = task.host
                if not isinstance(host, SpoutHost) or (task.rt is not None and not task.rt.processing):
                    continue
                for _ in range(self._idle_calls):
                    calls += 1
                    try:
                        n = host.next_tuples(1)
                    except TaskKilled as killed:
                        self.crash(killed)
                        emitted = True
                        break
                    host.acks_due()
                    if n:
                        emitted = True
                        break
            if not emitted and not moved:
                return
            if calls >= self._max_spout_calls:
                self.drain()
                return

    def next_event(self) -> float | None:
        due = [t.next_tick for t in self._tasks.tasks.values() if t.next_tick is not None]
        deadline = self._tracker.next_deadline()
        if deadline is not None:
            due.append(deadline)
        wake = self._master.next_wake() if self._master is not None else None
        if wake is not None:
            due.append(wake)
        return min(due) if due else None

    def fire_due(self) -> None:
        now = self._clock()
        self._tracker.expire()
        for task in list(self._tasks.tasks.values()):
            host = task.host
            if task.next_tick is not None and task.next_tick <= now and isinstance(host, BoltHost):
                if task.rt is None or task.rt.processing:
                    host.tick()
                tick_s = host.tick_s or 0.0
                task.next_tick += tick_s
                if task.next_tick <= now:  # late by more than a period: one tick, as the instance's loop
                    task.next_tick = now + tick_s
        if self._master is not None:
            self._master.tick()

    def finished(self) -> bool:
        return not self._tracker.pending and not self._tasks.pending_ids() and not self._tasks.sources_not_done()

    def _deliver_results(self) -> bool:
        results = self._tracker.take_results()
        for spout_task, frame in results.items():
            host = self._tasks.tasks[spout_task].host
            assert isinstance(host, SpoutHost)
            host.on_results(frame)
        return bool(results)

    @staticmethod
    def _deliver(task: _Task, frame: bytes) -> None:
        if task.rt is None:
            host = task.host
            assert isinstance(host, BoltHost)
            host.process_frame(frame)
        elif frame_type(frame) == MsgType.CKPT_MARKER:
            task.rt.on_marker(frame)
        else:
            task.rt.on_batch(frame)


class Harness:
    """Runs ``topology`` (a TopologyDef or anything with ``build()``) in this process.

    ``run()`` runs until nothing moves (spouts idle or at EOF, every batch delivered) without
    time passing; ``advance(s)`` moves the clock, firing ticks, timeouts and checkpoints in time
    order, and runs between them; ``complete()`` advances until every source is at EOF and no
    tuple is in flight. Faults can be set at any time between those calls: ``kill_at``,
    ``fail_at``; ``TestSource`` items can hold ``EOF``, ``PAUSE`` and ``ABORT``::

        h = Harness(builder, capture=["count"])
        h.fail_at("split", nth=2).kill_at("count", 0, 5)
        r = h.run()                 # no time passes
        h.advance(30)               # message timeouts, ticks, windows fire
        assert r.acked == Counter({0: 1, 1: 1}) and r.pending == []

    Recovery is the engine's: a killed task is restarted with a new component (its fields are
    gone). At least once, the tuples it held time out and a replaying spout emits them again;
    effectively once, every task rolls back to the last complete checkpoint (``checkpoint()``,
    or every ``topology.stateful.checkpoint.interval.secs`` of harness time), as the master's
    checkpoint coordinator decides.
    """

    def __init__(self, topology: TopologyDef | Any, *, containers: int = 1, capture: Iterable[str] = (),
                 seed: int = 0, idle_calls: int = 100, max_spout_calls: int = 1_000_000,
                 start_time: float = START_TIME) -> None:
        capture = list(capture)
        topo = self.topology = load_topology(topology, "Harness capture", capture)
        self._clock = ManualClock(start_time)
        plan = self._plan = in_process_plan(topo, containers, "harness")
        self.result = HarnessResult(received={c: [] for c in capture})
        self.stateful = effectively_once(topo.config)
        reliability = ReliabilityConfig() if self.stateful else ReliabilityConfig.from_config(topo.config)
        tracker = ClockedTracker(reliability.timeout_s, self._clock)
        self._wire = InProcessWire((t.task_id for t in plan.packing.tasks), on_acks=tracker.on_ack_batch)
        self._faults = Faults(plan)
        storage = MemoryStorage()
        self._tasks = _TaskSet(plan, self._wire, self._faults, self.result, self._clock, random.Random(seed),
                               reliability, StatefulConfig.from_config(topo.config) if self.stateful else None,
                               storage)
        self.tasks = self._tasks.tasks
        master = None
        if self.stateful:
            coordinator = CheckpointCoordinator(CoordinatorConfig.from_config(topo.config),
                                                {t.task_id: t.component for t in plan.packing.tasks},
                                                storage.completed_ids(topo.name))
            master = SimulatedMaster(coordinator, storage, topo.name, self._tasks, self.result, self._clock)
        self._master = master
        self._loop = _Loop(self._tasks, self._wire, tracker, master, self.result, self._clock,
                           idle_calls=idle_calls, max_spout_calls=max_spout_calls)
        with self._driving():
            if master is not None:
                master.start()
                self._loop.route()  # the first restore's reports: every task processes
            else:
                self._tasks.start_all()

    # --- the API ---
    @property
    def now(self) -> float:
        """The harness's clock (seconds); it starts at ``start_time``."""
        return self._clock()

    def kill_at(self, component: str, task_index: int, nth_tuple: int) -> Harness:
        """Kill task ``task_index`` (0-based, within the bolt ``component``) when it receives its
        ``nth_tuple``-th tuple (1-based, counted across restarts), before processing it; the
        task restarts at once. Once per call."""
        self._faults.kill_at(component, task_index, nth_tuple)
        return self

    def fail_at(self, component: str, nth: int | None = None, *, when: Callable[[Any], bool] | None = None,
                times: int = 1) -> Harness:
        """The bolt ``component`` fails a tuple instead of processing it: its ``nth`` tuple
        (1-based, over all its tasks), or the first ``times`` tuples for which ``when(tuple)``
        is true. A replayed tuple is a new arrival: ``nth`` fails it once only."""
        self._faults.fail_at(component, nth, when, times)
        return self

    def run(self) -> HarnessResult:
        """Runs until nothing moves, with no time passing."""
        with self._driving():
            self._loop.quiesce()
        return self._snapshot()

    def advance(self, seconds: float) -> HarnessResult:
        """Moves the clock by ``seconds``, stopping at each tick, message timeout and checkpoint
        due on the way (in time order) and running until quiet after each."""
        if seconds < 0:
            raise ValueError(f"advance: seconds: expected a number >= 0, found {seconds}")
        target = self._clock() + seconds
        loop = self._loop
        with self._driving():
            loop.quiesce()
            while True:
                due = loop.next_event()
                if due is None or due > target:
                    break
                self._clock.t = max(self._clock.t, due)
                loop.fire_due()
                loop.quiesce()
            self._clock.t = target
            loop.fire_due()
            loop.quiesce()
        return self._snapshot()

    def complete(self, max_seconds: float = 3600.0) -> HarnessResult:
        """Advances from event to event until every TestSource is done and no tuple is in
        flight (acked, failed or timed out); AssertionError after ``max_seconds`` of harness time."""
        limit = self._clock() + max_seconds
        self.run()
        while not self._loop.finished():
            due = self._loop.next_event()
            if due is None or due > limit:
                raise AssertionError(f"Harness.complete: not done after {max_seconds:g} s of harness time "
                                     f"(in flight: {sorted(map(repr, self._tasks.pending_ids()))}, sources not "
                                     f"done: {self._tasks.sources_not_done()}); expected every tuple acked, "
                                     f"failed or timed out")
            self.advance(due - self._clock())
        return self._snapshot()

    def checkpoint(self) -> int:
        """Effectively once: takes a checkpoint now, as the master would; returns its id once
        every task saved (complete). It becomes the checkpoint a crash rolls back to."""
        if self._master is None:
            raise ValueError(f"checkpoint: topology '{self.topology.name}' is not EFFECTIVELY_ONCE "
                             f"(topology.reliability.mode); expected a stateful topology")
        with self._driving():
            cid = self._master.checkpoint_now()
            self._loop.quiesce()
        self._snapshot()
        if cid not in self.result.checkpoints:
            raise AssertionError(f"checkpoint {cid}: expected every task to save it, found only tasks "
                                 f"{self._master.saved(cid)}")
        return cid

    def component(self, component: str, task_index: int = 0) -> Any:
        """The user object of a task now (a restart makes a new one)."""
        tasks = self._plan.packing.tasks_of(component)
        if not 0 <= task_index < len(tasks):
            raise ValueError(f"component: task_index {task_index} of '{component}': expected 0..{len(tasks) - 1}, "
                             f"found {task_index}")
        return self.tasks[tasks[task_index]].host.user

    def parallelism(self, component: str) -> int:
        """How many tasks ``component`` has."""
        return len(self._plan.packing.tasks_of(component))

    def close(self) -> None:
        """Closes every task as at a topology's end (a bolt's ``cleanup``, a spout's ``close``)."""
        with self._driving():
            for task in self.tasks.values():
                task.host.close()
            self._loop.drain()
        self._snapshot()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _driving(self) -> Iterator[None]:
        # TestSource finds its ledger (the outside world it reads from) through this
        set_active_ledgers(self._tasks.ledgers)
        try:
            yield
        finally:
            set_active_ledgers(None)

    def _snapshot(self) -> HarnessResult:
        self.result.pending = self._tasks.pending_ids()
        return self.result
