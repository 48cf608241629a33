"""Backpressure state of one stream manager, pure.

Watermarks live in the transports (asyncio's write-buffer limits call ``pause_writing``
above the high mark and ``resume_writing`` below the low mark: that is the hysteresis).
This class decides what follows from those edges: a stream manager with any slow
connection of its own, or any peer that announced backpressure, stops reading from its
local spouts; the first slow connection makes it broadcast StartBackPressure, the last one
to drain makes it broadcast StopBackPressure. A peer that disconnects is no longer counted.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


class ConnKind(enum.Enum):
    TASK = "task"  # a local instance, by task id
    STMGR = "stmgr"  # an outbound connection to a peer stream manager, by container


@dataclass(frozen=True)
class ConnKey:
    """One of our connections. ``str()`` is the label the metrics have always used
    ("task 4", "stmgr 2"), so exported names stay the same while code never parses them."""

    kind: ConnKind
    ident: int

    @classmethod
    def task(cls, task_id: int) -> ConnKey:
        return cls(ConnKind.TASK, task_id)

    @classmethod
    def stmgr(cls, container: int) -> ConnKey:
        return cls(ConnKind.STMGR, container)

    def __str__(self) -> str:
        return f"{self.kind.value} {self.ident}"


def describe(keys: Iterable[ConnKey]) -> str:
    """The labels joined, sorted as text ("stmgr 1, task 4"), as the cause was always reported."""
    return ", ".join(sorted(map(str, keys)))


class Action(enum.Enum):
    PAUSE_SPOUTS = "pause_spouts"
    RESUME_SPOUTS = "resume_spouts"
    BROADCAST_START = "broadcast_start"
    BROADCAST_STOP = "broadcast_stop"


@dataclass
class BackpressureState:
    clock: Callable[[], float]
    slow: set[ConnKey] = field(default_factory=set)  # our connections above the high mark
    peers: set[int] = field(default_factory=set)  # containers in backpressure
    since: float | None = None  # when spouts were last paused
    slow_since: dict[ConnKey, float] = field(default_factory=dict)
    slow_total: dict[ConnKey, float] = field(default_factory=dict)  # per connection that caused it
    total_s: float = 0.0  # time spent with spouts paused, closed intervals
    episodes: int = 0

    @property
    def local(self) -> bool:
        return bool(self.slow)

    @property
    def spouts_paused(self) -> bool:
        return bool(self.slow or self.peers)

    def local_cause(self) -> str | None:
        """What we are in backpressure for (our slow connections), or None when none is slow: a
        peer that connects late is told at once (the clique's ``backpressure_cause``)."""
        return describe(self.slow) if self.slow else None

    def time_in_backpressure(self) -> float:
        open_s = self.clock() - self.since if self.since is not None else 0.0
        return self.total_s + open_s

    def _transition(self, was_paused: bool, was_local: bool) -> list[Action]:
        out: list[Action] = []
        if self.local and not was_local:
            out.append(Action.BROADCAST_START)
        elif was_local and not self.local:
            out.append(Action.BROADCAST_STOP)
        if self.spouts_paused and not was_paused:
            self.since = self.clock()
            self.episodes += 1
            out.append(Action.PAUSE_SPOUTS)
        elif was_paused and not self.spouts_paused:
            if self.since is not None:
                self.total_s += self.clock() - self.since
            self.since = None
            out.append(Action.RESUME_SPOUTS)
        return out

    def connection_high(self, key: ConnKey) -> list[Action]:
        was = (self.spouts_paused, self.local)
        if key not in self.slow:
            self.slow.add(key)
            self.slow_since[key] = self.clock()
        return self._transition(*was)

    def connection_low(self, key: ConnKey) -> list[Action]:
        """Also for a slow connection that closed: its buffer is gone."""
        was = (self.spouts_paused, self.local)
        if key in self.slow:
            self.slow.discard(key)
            self.slow_total[key] = self.slow_total.get(key, 0.0) + self.clock() - self.slow_since.pop(key)
        return self._transition(*was)

    def time_by_cause(self) -> dict[ConnKey, float]:
        """Seconds each connection has spent above the high mark (Heron's
        __time_spent_back_pressure_by_compid, keyed by connection)."""
        now = self.clock()
        out = dict(self.slow_total)
        for key, t0 in self.slow_since.items():
            out[key] = out.get(key, 0.0) + now - t0
        return out

    def peer_start(self, container: int) -> list[Action]:
        was = (self.spouts_paused, self.local)
        self.peers.add(container)
        return self._transition(*was)

    def peer_stop(self, container: int) -> list[Action]:
        was = (self.spouts_paused, self.local)
        self.peers.discard(container)
        return self._transition(*was)
