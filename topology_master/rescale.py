"""A live rescale's protocol on the topology master, pure: which step is due, and when.

``heron-py update`` of an at-least-once or at-most-once topology writes the resized definition
and its packing (planner.packing.repack: kept tasks keep their ids and containers) to the state
manager and asks the master to rescale. Only what must change is stopped: the containers'
executors start the added tasks at once (they follow the stored packing) and stop the removed
ones once the applied plan drops them; every other process keeps running. The routing switches
at a drain point, so that no key reaches two tasks:

1. STAGING: until every added task is connected to its stream manager (or ``stage_wait_s``
   passed: the switch then goes on without it, as a first plan goes on without a task that
   cannot start; its stream manager holds its frames until it comes);
2. DRAINING: the spouts are deactivated by a plan the master pushes but does not store (a master
   taking over must not adopt a pause that was only the rescale's), and every stream manager is
   asked to say when its spouts' tuples in flight are done (``DrainRequest``/``Drained``), at
   most ``drain_wait_s`` (``heron_py.rescale.drain.secs``, 1 s, or Storm's rebalance ``-w``; at
   most the message timeout, after which a tree is failed and replayed anyway): a slow bolt's
   backlog is not waited out with the spouts stopped, and a key in it may then reach its old
   task after the switch, which at least once and at most once allow (their state is the
   task's memory; effectively once restores instead, below);
3. SWITCH: one stored plan with the new packing and the run state from before, which every
   stream manager and instance switches to in place.

The pause (no spout emits) is steps 2 and 3 only: the added tasks' processes start while
everything still flows.

Effectively once (``restore``) has no drain: once the added tasks are connected, the SWITCH
comes at once and every task restores the newest complete checkpoint under the new plan (the
master's checkpoint driver, ``CheckpointDriver.replan``). The restore is the cut: what any task
did after that checkpoint is rolled back and replayed by the spouts, the stream managers' fences
drop the old run's frames, and each resized component's tasks take their key groups' share of
its checkpointed state (heron_py/runtime/rescale.py). So no key's state is on two tasks, with no
wait for in-flight tuples. The pause is the restore's.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Collection
from dataclasses import dataclass

from heron_py.planner.model import PackingPlan, TopologyDef
from heron_py.planner.packing import moved_tasks


class Phase(enum.Enum):
    IDLE = "idle"
    STAGING = "staging"
    DRAINING = "draining"


class Step(enum.Enum):
    DRAIN = "drain"  # push the deactivating plan and the drain request
    SWITCH = "switch"  # push the new packing's plan


@dataclass(frozen=True)
class Target:
    topology: TopologyDef
    packing: PackingPlan
    added: frozenset[int]
    removed: frozenset[int]


class LiveRescale:
    """One rescale at a time; ``clock`` is injected (monotonic seconds)."""

    def __init__(self, clock: Callable[[], float], *, stage_wait_s: float = 60.0) -> None:
        self._clock = clock
        self.stage_wait_s = stage_wait_s
        self.phase = Phase.IDLE
        self.target: Target | None = None
        self.drain_id = 0
        self.drain_wait_s = 30.0
        self._since = 0.0
        self._drained: set[int] = set()
        self._containers = 0
        self.restore = False  # effectively once: a switch without a drain (the restore cuts)
        self.note = ""  # why the last switch went on without waiting (a log line), or ""

    def begin(self, current: PackingPlan, topology: TopologyDef, packing: PackingPlan,
              drain_wait_s: float, *, restore: bool = False) -> str | None:
        """Starts a rescale to ``packing``; the reason it cannot, or None. ``restore``: the
        switch needs no drain (effectively once: a restore follows it)."""
        if self.phase is not Phase.IDLE:
            return f"a rescale is already under way ({self.phase.value}); wait for it to finish"
        if packing.num_containers != current.num_containers:
            return (f"a live rescale keeps the topology's {current.num_containers} containers; the stored packing "
                    f"has {packing.num_containers}")
        added, removed = moved_tasks(current, packing)
        self.target = Target(topology, packing, frozenset(added), frozenset(removed))
        self.drain_wait_s = drain_wait_s
        self.restore = restore
        self._containers = packing.num_containers
        self.phase = Phase.STAGING
        self._since = self._clock()
        self.note = ""
        return None

    def on_instances(self, connected: Collection[int]) -> Step | None:
        """The tasks connected to their stream managers (as they report): DRAIN (SWITCH when
        ``restore``) once every added task is among them."""
        if self.phase is not Phase.STAGING or self.target is None:
            return None
        if self.target.added <= set(connected):
            return self._staged()
        return None

    def _staged(self) -> Step:
        return self._switch() if self.restore else self._drain()

    def _drain(self) -> Step:
        self.phase = Phase.DRAINING
        self.drain_id += 1
        self._drained = set()
        self._since = self._clock()
        return Step.DRAIN

    def on_drained(self, container: int, drain_id: int) -> Step | None:
        """A stream manager's Drained: SWITCH once every container's came for this drain."""
        if self.phase is not Phase.DRAINING or drain_id != self.drain_id:
            return None  # late, for an earlier drain
        self._drained.add(container)
        if len(self._drained) >= self._containers:
            return self._switch()
        return None

    def _switch(self) -> Step:
        self.phase = Phase.IDLE
        return Step.SWITCH

    def tick(self) -> Step | None:
        """The waits' limits: a task that does not connect, a drain that does not end."""
        if self.phase is Phase.IDLE:
            return None
        waited = self._clock() - self._since
        if self.phase is Phase.STAGING and waited >= self.stage_wait_s:
            self.note = f"added tasks not connected after {self.stage_wait_s:g} s; switching without them"
            return self._staged()
        if self.phase is Phase.DRAINING and waited >= self.drain_wait_s:
            missing = sorted(set(range(self._containers)) - self._drained)
            self.note = (f"stream managers {missing} not drained after {self.drain_wait_s:g} s; switching: keys "
                         f"still in flight may reach their old task, and what is lost is replayed")
            return self._switch()
        return None

    def finish(self) -> Target:
        """The target, once SWITCH was returned; the rescale is over."""
        target = self.target
        assert target is not None
        self.target = None
        return target

    @property
    def busy(self) -> bool:
        return self.phase is not Phase.IDLE or self.target is not None
