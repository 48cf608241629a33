"""``Harness``: a topology in this process with fault and time control, for users' tests.

Every task is the engine's own component host (routing, groupings, batching, anchoring), driven
by this module in place of the instance, the stream manager and the master:

- acking (at least once): the stream managers' XOR tracker (``heron_py.acking.tracker``), run
  here on the harness's clock (``ClockedTracker``: a root times out at exactly the message
  timeout); ACK_RESULT frames go back to the spouts' hosts, which call ``ack``/``fail``;
- effectively once: each task's ``StatefulTask`` (the instance's own code), checkpoints into
  an in-memory storage, markers routed behind the tuples, and the master's rollback after a crash;
- time: one manual clock (``advance``); ticks, window bolts' clocks, message timeouts and
  checkpoint intervals read it, never the wall clock;
- faults: ``kill_at`` (a bolt task dies at its Nth tuple), ``fail_at`` (a bolt fails a tuple
  instead of processing it), and ``TestSource``'s ``ABORT`` marker (a spout task dies there).

Nothing here sleeps or opens a socket: a run is deterministic for its seed.
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
from heron_py.checkpoint.storage import (
    DEFAULT_KEEP_LAST,
    CheckpointStorage,
    IncompleteCheckpointError,
    Marker,
    packing_of,
)
from heron_py.common.config import ReliabilityConfig, StatefulConfig, effectively_once
from heron_py.common.framing import MsgType, batch_dest, frame_type
from heron_py.common.wire import decode
from heron_py.planner.logical import validate
from heron_py.planner.model import ComponentKind, PhysicalPlan, StmgrLocation, TopologyDef, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import BoltHost, ComponentHost, HostOptions, SpoutHost, make_host
from heron_py.runtime.stateful import StatefulTask
from heron_py.testing.inprocess import InProcessResult, Received, fused_hint
from heron_py.testing.source import SourceLedger, TaskKilled, TestSource, set_active_ledgers
from proto import heron_py_pb2 as pb

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
class _FailRule:
    component: str
    nth: int | None
    when: Callable[[Any], bool] | None
    times: int
    seen: int = 0
    failed: int = 0


@dataclass
class _Task:
    task_id: int
    component: str
    index: int  # within its component
    host: ComponentHost
    rt: StatefulTask | None = None
    received: int = 0  # tuples, across restarts
    next_tick: float | None = None


def _guarded_batch(kills: dict[tuple[str, int], int], task: _Task,
                   process_batch: Callable[[list[Any]], tuple[list[Any], int]]
                   ) -> Callable[[list[Any]], tuple[list[Any], int]]:
    """A bolt's untracked batches (heron_process_batch: the Streamlet operators) count towards
    ``kill_at`` (``kills``: (component, task index) -> nth tuple) as their tuples do: the task
    dies at the batch holding its nth tuple, before processing it (what it would have emitted
    of the batch is lost either way). ``fail_at`` concerns tracked tuples, which come one at a
    time through ``process``."""
    kill_key = (task.component, task.index)

    def run(values: list[Any]) -> tuple[list[Any], int]:
        first = task.received + 1
        task.received += len(values)
        nth = kills.get(kill_key)
        if nth is not None and first <= nth <= task.received:
            del kills[kill_key]
            raise TaskKilled(task.component, task.task_id, f"kill_at its tuple {nth}")
        return process_batch(values)

    return run


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
    or every ``topology.stateful.checkpoint.interval.secs`` of harness time).
    """

    def __init__(self, topology: TopologyDef | Any, *, containers: int = 1, capture: Iterable[str] = (),
                 seed: int = 0, idle_calls: int = 100, max_spout_calls: int = 1_000_000,
                 start_time: float = START_TIME) -> None:
        topo: TopologyDef = topology if isinstance(topology, TopologyDef) else topology.build()
        validate(topo)
        capture = list(capture)
        for c in capture:
            fused_hint(topo, "Harness capture", c)
        self.topology = topo
        self._clock = ManualClock(start_time)
        self._rng = random.Random(seed)
        self._idle_calls = idle_calls
        self._max_spout_calls = max_spout_calls
        packing = round_robin(topo, containers)
        self._plan = PhysicalPlan(topo, packing, tuple(StmgrLocation(c, "harness", 0, 0) for c in range(containers)),
                                  TopologyState.RUNNING, 1)
        self.result = HarnessResult(received={c: [] for c in capture})
        self.stateful = effectively_once(topo.config)
        self._reliability = ReliabilityConfig() if self.stateful else ReliabilityConfig.from_config(topo.config)
        self._ckpt = StatefulConfig.from_config(topo.config)
        self._storage = MemoryStorage()
        self._ledgers: dict[tuple[str, int], SourceLedger] = {}
        self._wire: collections.deque[bytes] = collections.deque()
        self._inbox: dict[int, collections.deque[bytes]] = {t.task_id: collections.deque() for t in packing.tasks}
        self._tracker = ClockedTracker(self._reliability.timeout_s, self._clock)
        self._kills: dict[tuple[str, int], int] = {}  # (component, task index) -> nth tuple
        self._fails: list[_FailRule] = []
        self._restore_id = 0
        self._next_ckpt_id = 1
        self._saved: dict[int, dict[int, bool]] = {}  # checkpoint id -> tasks that saved -> whether with state
        self._next_ckpt_at = self._clock() + self._ckpt.interval_s
        self._started = False
        self.tasks: dict[int, _Task] = {}
        index: dict[str, int] = collections.Counter()
        with self._driving():
            for t in packing.tasks:
                task = _Task(t.task_id, t.component, index[t.component], self._new_host(t.task_id))
                index[t.component] += 1
                self.tasks[t.task_id] = task
            if self.stateful:
                for task in self.tasks.values():
                    task.rt = self._new_rt(task.host)
                self._rollback(first=True)
            else:
                for task in self.tasks.values():
                    self._start(task)

    # --- the API ---
    @property
    def now(self) -> float:
        """The harness's clock (seconds); it starts at ``start_time``."""
        return self._clock()

    def kill_at(self, component: str, task_index: int, nth_tuple: int) -> Harness:
        """Kill task ``task_index`` (0-based, within the bolt ``component``) when it receives its
        ``nth_tuple``-th tuple (1-based, counted across restarts), before processing it; the
        task restarts at once. Once per call."""
        self._check_bolt("kill_at", component)
        n = len(self._plan.packing.tasks_of(component))
        if not 0 <= task_index < n:
            raise ValueError(f"kill_at: task_index {task_index} of '{component}': expected 0..{n - 1}, "
                             f"found {task_index}")
        if nth_tuple < 1:
            raise ValueError(f"kill_at: nth_tuple of '{component}': expected an int >= 1, found {nth_tuple}")
        self._kills[(component, task_index)] = nth_tuple
        return self

    def fail_at(self, component: str, nth: int | None = None, *, when: Callable[[Any], bool] | None = None,
                times: int = 1) -> Harness:
        """The bolt ``component`` fails a tuple instead of processing it: its ``nth`` tuple
        (1-based, over all its tasks), or the first ``times`` tuples for which ``when(tuple)``
        is true. A replayed tuple is a new arrival: ``nth`` fails it once only."""
        self._check_bolt("fail_at", component)
        if (nth is None) == (when is None):
            raise ValueError(f"fail_at('{component}'): expected exactly one of nth or when, found "
                             f"{'both' if nth is not None else 'neither'}")
        if nth is not None and nth < 1:
            raise ValueError(f"fail_at('{component}'): nth: expected an int >= 1, found {nth}")
        self._fails.append(_FailRule(component, nth, when, 1 if nth is not None else times))
        return self

    def run(self) -> HarnessResult:
        """Runs until nothing moves, with no time passing."""
        with self._driving():
            self._quiesce()
        return self._snapshot()

    def advance(self, seconds: float) -> HarnessResult:
        """Moves the clock by ``seconds``, stopping at each tick, message timeout and checkpoint
        due on the way (in time order) and running until quiet after each."""
        if seconds < 0:
            raise ValueError(f"advance: seconds: expected a number >= 0, found {seconds}")
        target = self._clock() + seconds
        with self._driving():
            self._quiesce()
            while True:
                due = self._next_event()
                if due is None or due > target:
                    break
                self._clock.t = max(self._clock.t, due)
                self._fire_due()
                self._quiesce()
            self._clock.t = target
            self._fire_due()
            self._quiesce()
        return self._snapshot()

    def complete(self, max_seconds: float = 3600.0) -> HarnessResult:
        """Advances from event to event until every TestSource is done and no tuple is in
        flight (acked, failed or timed out); AssertionError after ``max_seconds`` of harness time."""
        limit = self._clock() + max_seconds
        self.run()
        while not self._finished():
            due = self._next_event()
            if due is None or due > limit:
                raise AssertionError(f"Harness.complete: not done after {max_seconds:g} s of harness time "
                                     f"(in flight: {sorted(map(repr, self._pending_ids()))}, sources not done: "
                                     f"{self._sources_not_done()}); expected every tuple acked, failed or timed out")
            self.advance(due - self._clock())
        return self._snapshot()

    def checkpoint(self) -> int:
        """Effectively once: takes a checkpoint now, as the master would; returns its id once
        every task saved (complete). It becomes the checkpoint a crash rolls back to."""
        if not self.stateful:
            raise ValueError(f"checkpoint: topology '{self.topology.name}' is not EFFECTIVELY_ONCE "
                             f"(topology.reliability.mode); expected a stateful topology")
        with self._driving():
            cid = self._start_checkpoint()
            self._quiesce()
        self._snapshot()
        if cid not in self.result.checkpoints:
            saved = sorted(self._saved.get(cid, ()))
            raise AssertionError(f"checkpoint {cid}: expected every task to save it, found only tasks {saved}")
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
            self._drain()
        self._snapshot()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- building and restarting tasks ---
    @contextmanager
    def _driving(self) -> Iterator[None]:
        # TestSource finds its ledger (the outside world it reads from) through this
        set_active_ledgers(self._ledgers)
        try:
            yield
        finally:
            set_active_ledgers(None)

    def _check_bolt(self, what: str, component: str) -> None:
        names = [c.name for c in self.topology.components]
        fused_hint(self.topology, what, component)
        if component not in names:
            raise ValueError(f"{what}: component '{component}' is not in topology '{self.topology.name}' "
                             f"(components: {', '.join(names)})")
        if self.topology.component(component).kind is not ComponentKind.BOLT:
            raise ValueError(f"{what}: component '{component}' is a spout; expected a bolt (a spout task "
                             f"crashes at an ABORT item of a TestSource)")

    def _new_host(self, task_id: int) -> ComponentHost:
        component = self._plan.task(task_id).component
        observer = None
        if component in self.result.received:
            out = self.result.received[component]

            def observer(source: str, src: int, rows: list[Any]) -> None:
                out.extend(Received(task_id, source, src, r[0], list(r[1])) for r in rows)

        options = HostOptions(reliability=self._reliability, observer=observer, rng=random.Random(self._rng.random()),
                              clock=self._clock)
        self._ledgers.setdefault((component, task_id), SourceLedger(acking=self._reliability.acking, clock=self._clock))
        return make_host(self._plan, task_id, self._sink, options)

    def _new_rt(self, host: ComponentHost) -> StatefulTask:
        return StatefulTask(host, self._storage, self.topology.name, self._sink,
                            align_bytes=self._ckpt.align_bytes, log=LOG, clock=self._clock)

    def _start(self, task: _Task) -> None:
        """A non-stateful task's first start or restart: initialize, activate."""
        self._prepare(task.host)
        task.host.initialize()
        self._instrument(task)
        task.host.start()

    def _prepare(self, host: ComponentHost) -> None:
        # a component with heronpy's window bolts' clock (time.time as an attribute) reads ours
        if getattr(type(host.user), "clock", None) in (time.time, time.monotonic):
            host.user.clock = self._clock

    def _instrument(self, task: _Task) -> None:
        """After (re)initialize: our guards around process(), the spout's outcomes recorded,
        the first tick scheduled."""
        host = task.host
        self._prepare(host)
        self.result.components[task.task_id] = host.user
        if isinstance(host, BoltHost):
            host._process = self._guarded(task, host._process)
            if host._batch is not None:
                host._batch = _guarded_batch(self._kills, task, host._batch)
            task.next_tick = self._clock() + host.tick_s if host.tick_s else None
        elif isinstance(host, SpoutHost):
            self._record_outcomes(task, host)

    def _record_outcomes(self, task: _Task, host: SpoutHost) -> None:
        user = host.user
        ack, fail = user.ack, user.fail
        result = self.result

        def recorded_ack(tup_id: Any) -> None:
            result.acked[tup_id] += 1
            result.outcomes.append(Outcome(task.component, task.task_id, tup_id, "ack"))
            ack(tup_id)

        def recorded_fail(tup_id: Any) -> None:
            result.failed[tup_id] += 1
            result.outcomes.append(Outcome(task.component, task.task_id, tup_id, "fail"))
            fail(tup_id)

        user.ack, user.fail = recorded_ack, recorded_fail

    def _guarded(self, task: _Task, process: Callable[[Any], None]) -> Callable[[Any], None]:
        kill_key = (task.component, task.index)
        host = task.host
        fails = self._fails  # read at each tuple: rules may be added after the start

        def run(tup: Any) -> None:
            task.received += 1
            nth = self._kills.get(kill_key)
            if nth is not None and task.received == nth:
                del self._kills[kill_key]
                raise TaskKilled(task.component, task.task_id, f"kill_at its tuple {nth}")
            for r in fails:
                if r.component != task.component:
                    continue
                r.seen += 1
                if r.failed < r.times and (r.seen == r.nth if r.when is None else r.when(tup)):
                    r.failed += 1
                    host.user.delegate.fail(tup)  # the engine's fail, whatever the bolt overrides
                    return
            process(tup)

        return run

    def _crash(self, killed: TaskKilled) -> None:
        """A task died: Heron's recovery. At least once (or at most once) the task alone restarts,
        with what it had not sent lost; effectively once every task rolls back."""
        self.result.kills.append(str(killed))
        LOG.info("%s", killed)
        old = self.tasks[killed.task_id]
        old.host.emitter.discard()  # emitted, not sent: gone with the process
        old.host = self._new_host(killed.task_id)
        if self.stateful:
            old.rt = self._new_rt(old.host)
            self._rollback(first=False)
        else:
            self._start(old)

    def _rollback(self, *, first: bool) -> None:
        """The master's restore: every task loads the last complete checkpoint (0: clean), the
        old run's frames are dropped, then every task starts processing."""
        self._restore_id += 1
        completed = self._storage.completed_ids(self.topology.name)
        cid = completed[-1] if completed else 0
        self._wire.clear()
        for box in self._inbox.values():
            box.clear()
        self._saved.clear()
        fresh = []  # tasks whose first restore this is: they are activated after it
        for task in self.tasks.values():
            assert task.rt is not None
            if not task.rt.initialized:
                fresh.append(task)
            self._prepare(task.host)
            task.rt.restore(self._restore_id, cid)
            self._instrument(task)
        self._route()  # the StateRestored reports
        for task in self.tasks.values():
            assert task.rt is not None
            task.rt.start_processing(self._restore_id)
        for task in fresh:
            task.host.start()
        if not first:
            self.result.restores.append(cid)

    # --- moving tuples ---
    def _sink(self, frames: list[bytes]) -> None:
        self._wire.extend(frames)

    def _route(self) -> bool:
        """Every frame on the wire to its place; True if any. Batch frames (tuples, markers, acks)
        stay raw, routed on their header as the stream manager routes them; any other frame is
        decoded by the wire's registry (``heron_py.common.wire``) and handled by its class."""
        moved = bool(self._wire)
        while self._wire:
            f = self._wire.popleft()
            kind = frame_type(f)
            if kind in (MsgType.TUPLE_BATCH, MsgType.CKPT_MARKER):
                self._inbox[batch_dest(f)].append(f)
            elif kind == MsgType.ACK_BATCH:
                self._tracker.on_ack_batch(f)
            else:  # a task's report, taken as the master takes it; another raw frame is dropped
                match decode(kind, f, "an in-process task"):
                    case pb.CheckpointSaved() as saved:
                        self._on_saved(saved)
                    case pb.StateRestored() as restored:
                        if not restored.ok:
                            raise AssertionError(f"task {restored.task_id} could not restore: {restored.error}")
                    case Message() as msg:
                        raise AssertionError(f"the harness has no handler for a task's {type(msg).__name__}")
        return moved

    def _deliver_results(self) -> bool:
        results = self._tracker.take_results()
        for spout_task, frame in results.items():
            host = self.tasks[spout_task].host
            assert isinstance(host, SpoutHost)
            host.on_results(frame)
        return bool(results)

    def _drain(self) -> bool:
        """Flush, route and deliver until nothing is left; True if anything moved."""
        moved = False
        while True:
            for task in list(self.tasks.values()):
                task.host.flush()
            busy = self._route()
            busy = self._deliver_results() or busy
            for task in list(self.tasks.values()):
                box = self._inbox[task.task_id]
                while box:
                    busy = True
                    frame = box.popleft()
                    try:
                        self._deliver(task, frame)
                    except TaskKilled as killed:
                        self._crash(killed)
                        break
            if not busy:
                return moved
            moved = True

    def _deliver(self, task: _Task, frame: bytes) -> None:
        if task.rt is None:
            host = task.host
            assert isinstance(host, BoltHost)
            host.process_frame(frame)
        elif frame_type(frame) == MsgType.CKPT_MARKER:
            task.rt.on_marker(frame)
        else:
            task.rt.on_batch(frame)

    def _quiesce(self) -> None:
        """Spouts emit and batches move until a round where no spout emits and nothing moves."""
        calls = 0
        while True:
            moved = self._drain()
            emitted = False
            for task in list(self.tasks.values()):
                host = task.host
                if not isinstance(host, SpoutHost) or (task.rt is not None and not task.rt.processing):
                    continue
                for _ in range(self._idle_calls):
                    calls += 1
                    try:
                        n = host.next_tuples(1)
                    except TaskKilled as killed:
                        self._crash(killed)
                        emitted = True
                        break
                    host.acks_due()
                    if n:
                        emitted = True
                        break
            if not emitted and not moved:
                return
            if calls >= self._max_spout_calls:
                self._drain()
                return

    # --- time ---
    def _next_event(self) -> float | None:
        due = [t.next_tick for t in self.tasks.values() if t.next_tick is not None]
        deadline = self._tracker.next_deadline()
        if deadline is not None:
            due.append(deadline)
        if self.stateful:
            due.append(self._next_ckpt_at)
        return min(due) if due else None

    def _fire_due(self) -> None:
        now = self._clock()
        self._tracker.expire()
        for task in list(self.tasks.values()):
            host = task.host
            if task.next_tick is not None and task.next_tick <= now and isinstance(host, BoltHost):
                if task.rt is None or task.rt.processing:
                    host.tick()
                tick_s = host.tick_s or 0.0
                task.next_tick += tick_s
                if task.next_tick <= now:  # late by more than a period: one tick, as the instance's loop
                    task.next_tick = now + tick_s
        if self.stateful and self._next_ckpt_at <= now:
            self._next_ckpt_at = now + self._ckpt.interval_s
            self._start_checkpoint()

    # --- checkpoints ---
    def _start_checkpoint(self) -> int:
        cid = self._next_ckpt_id
        self._next_ckpt_id += 1
        self._saved[cid] = {}
        for task in self.tasks.values():
            if task.rt is not None and task.host.is_spout:
                task.rt.start_checkpoint(cid)
        return cid

    def _on_saved(self, msg: pb.CheckpointSaved) -> None:
        saved = self._saved.get(msg.checkpoint_id)
        if saved is None or msg.failed:
            return  # a checkpoint of a run rolled back, or one that failed: never complete
        saved[msg.task_id] = msg.stored
        if len(saved) == len(self.tasks):
            self._storage.mark_complete(self.topology.name, msg.checkpoint_id, [t for t, s in saved.items() if s],
                                        packing_of({t: task.host.component for t, task in self.tasks.items()}))
            self.result.checkpoints.append(msg.checkpoint_id)
            del self._saved[msg.checkpoint_id]
            for task in self.tasks.values():  # as the master's CheckpointCommitted: sinks and spouts commit
                if task.rt is not None:
                    task.rt.checkpoint_committed(msg.checkpoint_id)

    # --- the result ---
    def _pending_ids(self) -> list[Any]:
        out: list[Any] = []
        for task in self.tasks.values():
            rel = task.host.reliability
            if task.host.is_spout and rel is not None:
                out.extend(tup_id for tup_id, _ in rel.pending.values())
        return out

    def _sources_not_done(self) -> list[str]:
        # a source held at PAUSE waits for the test's next advance, not for complete()
        return [f"{t.component}[{t.index}]" for t in self.tasks.values()
                if isinstance(t.host.user, TestSource) and not t.host.user.done and not t.host.user.paused]

    def _finished(self) -> bool:
        return not self._tracker.pending and not self._pending_ids() and not self._sources_not_done()

    def _snapshot(self) -> HarnessResult:
        self.result.pending = self._pending_ids()
        return self.result
