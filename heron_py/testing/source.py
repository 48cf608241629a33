"""``TestSource``: a heronpy spout that emits a list of items, with ``EOF`` and ``ABORT`` markers.

Usable in any topology; the fault markers act only under ``heron_py.testing.Harness``, which
owns the "outside world" a real source would read from (a broker that remembers what was read
and what is not acked yet): the ``SourceLedger`` of each task. The ledger survives a crash of
the task, so a restarted TestSource resumes as a Kafka spout would, never from item 0.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from heron_py.api.spout.spout import Spout
from heron_py.api.state.state import State
from heron_py.api.state.stateful_component import StatefulComponent

LOG = logging.getLogger("heron_py.testing.source")


class _Marker:
    """A marker in a TestSource's items. One instance per kind, kept across pickling (the
    items travel in the component's config), so ``item is EOF`` holds in the task too."""

    _instances: dict[str, _Marker] = {}
    name: str

    def __new__(cls, name: str) -> _Marker:
        inst = cls._instances.get(name)
        if inst is None:
            inst = super().__new__(cls)
            inst.name = name
            cls._instances[name] = inst
        return inst

    def __reduce__(self) -> tuple[type[_Marker], tuple[str]]:
        return (_Marker, (self.name,))

    def __repr__(self) -> str:
        return self.name


EOF = _Marker("EOF")
"""Ends the task's stream here: items after it are never emitted."""
ABORT = _Marker("ABORT")
"""Crashes the task here, once (under the Harness); the engine's recovery follows."""
PAUSE = _Marker("PAUSE")
"""Holds the task's stream here until its clock moves (under the Harness: the next ``advance``),
so a test can act between two parts of the stream (take a checkpoint, look at a bolt)."""


class TaskKilled(Exception):
    """Raised inside a task to simulate its crash (an ABORT marker, ``Harness.kill_at``). The
    harness catches it, drops what the task had not sent, and restarts the task."""

    def __init__(self, component: str, task_id: int, why: str) -> None:
        super().__init__(f"task {task_id} of '{component}' killed: {why}")
        self.component = component
        self.task_id = task_id


@dataclass
class SourceLedger:
    """What the source outside the task knows about one task's reading: its position, the
    message ids emitted and not acked yet (in flight, to be replayed after a crash when acking
    is on), and the ABORT markers that already fired (each fires once)."""

    acking: bool = False
    position: int = 0
    unacked: dict[int, list[Any]] = field(default_factory=dict)
    aborted: set[int] = field(default_factory=set)
    harnessed: bool = True
    clock: Callable[[], float] = time.monotonic  # the harness's own, under it


# the ledgers of the harness that is driving the tasks right now (None: no harness); set by
# Harness around each of its calls, read by TestSource.initialize
_active_ledgers: dict[tuple[str, int], SourceLedger] | None = None


def set_active_ledgers(ledgers: dict[tuple[str, int], SourceLedger] | None) -> None:
    global _active_ledgers
    _active_ledgers = ledgers


def _values(item: Any) -> list[Any]:
    # a list or tuple is the tuple's values; anything else is a one-field tuple
    return list(item) if isinstance(item, (list, tuple)) else [item]


class TestSource(Spout, StatefulComponent):
    """Emits its items, each with its index in the list as message id. Subclass it to name the
    output fields (``outputs = ["word"]``) and give the items in the component's config::

        class Words(TestSource):
            outputs = ["word"]

        builder.add_spout("words", Words, par=1, config=TestSource.config(["a", "b", EOF]))

    An item that is a list or tuple is the tuple's values; anything else is a one-field tuple.
    With ``par`` > 1, task k takes items k, k + par, k + 2 par... (markers included).

    - ``EOF``: the task's stream ends (so does the end of the list).
    - ``PAUSE``: the task emits nothing more until its clock moves past the moment it got
      there (under the Harness: the next ``advance``); after a restart it waits again.
    - ``ABORT``: under the Harness, the task crashes there, once. Outside it the marker is
      skipped with a warning (a real process would crash again at each restart).
    - a failed (or timed out) message id is emitted again when ``replay`` is true (default),
      as a replaying source (Kafka, RabbitMQ) does; with ``replay`` false it is dropped.
    - effectively once: the position is the task's state, so after a restore the items after
      the checkpoint are emitted again, exactly once into the restored state.
    """

    __test__ = False  # not a pytest test class, whatever its name
    outputs = ["value"]
    ITEMS = "heron_py.testing.source.items"
    REPLAY = "heron_py.testing.source.replay"

    @classmethod
    def config(cls, items: Iterable[Any], *, replay: bool = True) -> dict[str, Any]:
        """The component config that gives a TestSource its items."""
        return {cls.ITEMS: list(items), cls.REPLAY: replay}

    def init_state(self, stateful_state: State) -> None:
        self._state = stateful_state
        pos = stateful_state.get("position")
        self._restored_position: int | None = int(pos) if pos is not None else 0

    def pre_save(self, checkpoint_id: str) -> None:
        self._state.put("position", self.position)

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        items = config.get(self.ITEMS)
        component, task_id = context.get_component_id(), context.get_task_id()
        if not isinstance(items, list):
            raise ValueError(f"TestSource '{component}': config {self.ITEMS}: expected a list of items "
                             f"(TestSource.config(items)), found {type(items).__name__}")
        tasks = sorted(context.get_component_tasks(component) or [task_id])
        index, par = tasks.index(task_id), len(tasks)
        self._share = [(i, item) for i, item in enumerate(items) if i % par == index]
        self._replay_failed = bool(config.get(self.REPLAY, True))
        self.component, self.task_id = component, task_id
        ledgers = _active_ledgers
        if ledgers is None:
            self._ledger = SourceLedger(harnessed=False)
        else:
            self._ledger = ledgers.setdefault((component, task_id), SourceLedger())
        self._paused_at: float | None = None
        restored = getattr(self, "_restored_position", None)
        self._replay: collections.deque[int] = collections.deque()
        if restored is not None:  # effectively once: the checkpoint's position, nothing in flight
            self.position = restored
            self._ledger.unacked.clear()
        else:  # a (re)start: where the source says, in-flight ids first when acking
            self.position = self._ledger.position
            if self._ledger.acking:
                self._replay.extend(sorted(self._ledger.unacked))
        self._ledger.position = self.position
        self._values = {i: _values(item) for i, item in self._share if not isinstance(item, _Marker)}

    @property
    def done(self) -> bool:
        """The stream ended (EOF or the list's end) and nothing waits to be emitted again."""
        if self._replay:
            return False
        pos = self.position
        return pos >= len(self._share) or self._share[pos][1] is EOF

    @property
    def paused(self) -> bool:
        """Held at a PAUSE marker (its clock has not moved since)."""
        return self._paused_at is not None and self._ledger.clock() <= self._paused_at

    def next_tuple(self) -> None:
        if self._replay:
            i = self._replay.popleft()
            self._emit_item(i)
            return
        ledger = self._ledger
        while self.position < len(self._share):
            i, item = self._share[self.position]
            if item is EOF:
                return
            if item is PAUSE:
                now = ledger.clock()
                if self._paused_at is None:
                    self._paused_at = now
                if now <= self._paused_at:
                    return
                self._paused_at = None
                self.position += 1
                ledger.position = self.position
                continue
            self.position += 1
            ledger.position = self.position
            if item is ABORT:
                if not ledger.harnessed:
                    LOG.warning("TestSource '%s': ABORT at item %d skipped outside the Harness", self.component, i)
                    continue
                if i in ledger.aborted:
                    continue
                ledger.aborted.add(i)
                raise TaskKilled(self.component, self.task_id, f"ABORT at item {i}")
            self._emit_item(i)
            return

    def _emit_item(self, i: int) -> None:
        values = self._values[i]
        if self._ledger.acking:
            self._ledger.unacked[i] = values
        self.emit(values, tup_id=i)

    def ack(self, tup_id: Any) -> None:
        self._ledger.unacked.pop(tup_id, None)

    def fail(self, tup_id: Any) -> None:
        if self._replay_failed and tup_id in self._values:
            self._replay.append(tup_id)
        else:
            self._ledger.unacked.pop(tup_id, None)
