"""``Harness``: a topology in this process with fault and time control, for users' tests.

Every task is the engine's own component host (routing, groupings, batching, anchoring), run by
the one in-process runner (``heron_py.testing.runner``) in place of the instance, the stream
manager and the master, with these of its options:

- acking (at least once): the stream managers' XOR tracker (``heron_py.acking.tracker``), run
  here on the harness's clock (``ClockedTracker``: a root times out at exactly the message
  timeout); ACK_RESULT frames go back to the spouts' hosts, which call ``ack``/``fail``;
- effectively once: each task's ``StatefulTask`` (the instance's own code), checkpoints into an
  in-memory storage (``MemoryStorage``), markers routed behind the tuples, and the master's own
  checkpoint rules (``heron_py.testing.master``: the real ``CheckpointCoordinator``, with its
  timeouts, failure count and restore fallbacks) rolling every task back after a crash;
- time: one manual clock (``advance``); ticks, window bolts' clocks, message timeouts and
  checkpoint intervals read it, never the wall clock;
- routing between calls, so the master is never re-entered while a task is mid-call.

Of its own: faults (``heron_py.testing.faults``): ``kill_at`` (a bolt task dies at its Nth
tuple), ``fail_at`` (a bolt fails a tuple instead of processing it), and ``TestSource``'s
``ABORT`` marker (a spout task dies there), with each ``TestSource``'s ledger (the outside world
it reads from); the spouts' outcomes per message id; and when a run is done (``complete``).
Nothing here sleeps or opens a socket: a run is deterministic for its seed.
"""

from __future__ import annotations

import collections
import functools
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from heron_py.checkpoint.storage import (
    DEFAULT_KEEP_LAST,
    CheckpointStorage,
    IncompleteCheckpointError,
    Marker,
)
from heron_py.common.config import effectively_once
from heron_py.planner.model import TopologyDef
from heron_py.runtime.host import BoltHost, SpoutHost
from heron_py.testing.faults import Faults
from heron_py.testing.inprocess import InProcessResult, capture_observer, in_process_plan, load_topology
from heron_py.testing.runner import Acking, EffectivelyOnce, Runner, RunOptions, Task
from heron_py.testing.source import SourceLedger, TestSource, set_active_ledgers

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


def _watching(result: HarnessResult, faults: Faults) -> Callable[[Task], None]:
    """What the harness does after each (re)initialize of a task's component: the user object
    kept in the result, the faults' guards around a bolt's process(), a spout's outcomes recorded."""

    def watch(task: Task) -> None:
        host = task.host
        result.components[task.task_id] = host.user
        if isinstance(host, BoltHost):
            faults.guard(task, host)
        elif isinstance(host, SpoutHost):
            _record_outcomes(task, host, result)

    return watch


def _record_outcomes(task: Task, host: SpoutHost, result: HarnessResult) -> None:
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


def _sources_not_done(tasks: Iterable[Task]) -> list[str]:
    # a source held at PAUSE waits for the test's next advance, not for complete()
    return [f"{t.component}[{t.index}]" for t in tasks
            if isinstance(t.host.user, TestSource) and not t.host.user.done and not t.host.user.paused]


def _finished(run: Runner) -> bool:
    """Every source at its end and no tuple in flight."""
    tracking = run.tracker is not None and run.tracker.pending
    return not tracking and not run.tasks.pending_ids() and not _sources_not_done(run.tasks.tasks.values())


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
        acking = Acking() if self.stateful else Acking.of(topo, self._clock)
        # each task's TestSource reads from its ledger, which outlives the task's restarts
        self._ledgers = {(t.component, t.task_id): SourceLedger(acking=acking.config.acking, clock=self._clock)
                         for t in plan.packing.tasks}
        self._faults = Faults(plan)
        options = RunOptions(clock=self._clock, manual_clock=True, acking=acking,
                             effectively_once=EffectivelyOnce(MemoryStorage(), self.result) if self.stateful else None,
                             observer=functools.partial(capture_observer, self.result.received),
                             on_start=_watching(self.result, self._faults), on_kill=self.result.kills.append)
        self._run = Runner(plan, options, random.Random(seed))
        self._quiesce = functools.partial(self._run.quiesce, idle_calls, max_spout_calls)
        self.tasks = self._run.tasks.tasks
        with self._driving():
            self._run.start()

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
            self._quiesce()
        return self._snapshot()

    def advance(self, seconds: float) -> HarnessResult:
        """Moves the clock by ``seconds``, stopping at each tick, message timeout and checkpoint
        due on the way (in time order) and running until quiet after each."""
        if seconds < 0:
            raise ValueError(f"advance: seconds: expected a number >= 0, found {seconds}")
        target = self._clock() + seconds
        timers = self._run.timers
        with self._driving():
            self._quiesce()
            while True:
                due = timers.next_event()
                if due is None or due > target:
                    break
                self._clock.t = max(self._clock.t, due)
                timers.fire_due()
                self._quiesce()
            self._clock.t = target
            timers.fire_due()
            self._quiesce()
        return self._snapshot()

    def complete(self, max_seconds: float = 3600.0) -> HarnessResult:
        """Advances from event to event until every TestSource is done and no tuple is in
        flight (acked, failed or timed out); AssertionError after ``max_seconds`` of harness time."""
        limit = self._clock() + max_seconds
        self.run()
        while not _finished(self._run):
            due = self._run.timers.next_event()
            if due is None or due > limit:
                raise AssertionError(f"Harness.complete: not done after {max_seconds:g} s of harness time "
                                     f"(in flight: {sorted(map(repr, self._run.tasks.pending_ids()))}, sources not "
                                     f"done: {_sources_not_done(self.tasks.values())}); expected every tuple acked, "
                                     f"failed or timed out")
            self.advance(due - self._clock())
        return self._snapshot()

    def checkpoint(self) -> int:
        """Effectively once: takes a checkpoint now, as the master would; returns its id once
        every task saved (complete). It becomes the checkpoint a crash rolls back to."""
        master = self._run.master
        if master is None:
            raise ValueError(f"checkpoint: topology '{self.topology.name}' is not EFFECTIVELY_ONCE "
                             f"(topology.reliability.mode); expected a stateful topology")
        with self._driving():
            cid = master.checkpoint_now()
            self._quiesce()
        self._snapshot()
        if cid not in self.result.checkpoints:
            raise AssertionError(f"checkpoint {cid}: expected every task to save it, found only tasks "
                                 f"{master.saved(cid)}")
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
            self._run.close()
        self._snapshot()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _driving(self) -> Iterator[None]:
        # TestSource finds its ledger (the outside world it reads from) through this
        set_active_ledgers(self._ledgers)
        try:
            yield
        finally:
            set_active_ledgers(None)

    def _snapshot(self) -> HarnessResult:
        self.result.pending = self._run.tasks.pending_ids()
        return self.result
