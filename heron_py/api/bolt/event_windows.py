"""Event-time windows (what Storm's BaseWindowedBolt offers with a timestamp field, a lag and a
late-tuple stream), as pure logic: no clock, no tuples, no I/O. The bolt around it is
``EventTimeWindowBolt`` (heron_py.api.bolt.event_window_bolt).

Windows are aligned to the slide: window k covers event times [k*slide, k*slide + length).
A tumbling window is a sliding one whose slide equals its length. The watermark is the
largest event time seen minus the allowed lag; a window is evaluated once, when the
watermark reaches its end, with every accepted item whose time falls into it.

A item is *late* when a window its time falls into has already been evaluated: it can no
longer be in every window it belongs to, so it goes to none of them (the bolt routes it to
the late stream). Every other item is in exactly the windows its time falls into.
Windows with no items are not evaluated (nothing to report, as Storm skips them).
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class WindowSpec:
    length: float
    slide: float
    lag: float = 0.0

    def __post_init__(self) -> None:
        for name in ("length", "slide"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"event-time window: {name} must be a number of seconds > 0, found {v!r}")
        if self.slide > self.length:
            raise ValueError(f"event-time window: slide ({self.slide:g}) must not be above length ({self.length:g})")
        if not (isinstance(self.lag, (int, float)) and math.isfinite(self.lag) and self.lag >= 0):
            raise ValueError(f"event-time window: lag must be a number of seconds >= 0, found {self.lag!r}")

    def first_index(self, t: float) -> int:
        """The lowest window index whose window holds time t."""
        return math.floor((t - self.length) / self.slide) + 1

    def last_index(self, t: float) -> int:
        return math.floor(t / self.slide)

    def bounds(self, k: int) -> tuple[float, float]:
        return k * self.slide, k * self.slide + self.length


@dataclass(frozen=True)
class Window:
    start: float
    end: float
    items: list[Any]


@dataclass
class EventTimeWindows:
    """Add items with their event time; ``advance()`` returns the windows the watermark has
    closed, oldest first; ``evictable()`` the items no window can need any more."""

    spec: WindowSpec
    watermark: float = -math.inf
    max_time: float = -math.inf
    _fired_upto: int | None = None  # windows with index <= this were evaluated (or skipped)
    _items: list[tuple[float, int, Any]] = field(default_factory=list)  # heap of (time, seq, item)
    _seq: int = 0

    def is_late(self, t: float) -> bool:
        return self._fired_upto is not None and self.spec.first_index(t) <= self._fired_upto

    def add(self, t: float, item: Any) -> bool:
        """True: the item is in its windows; False: it is late (in none)."""
        if not math.isfinite(t):
            raise ValueError(f"event-time window: an event time must be a finite number, found {t!r}")
        if self.is_late(t):
            return False
        heapq.heappush(self._items, (t, self._seq, item))
        self._seq += 1
        self.max_time = max(self.max_time, t)
        return True

    def advance(self, final: bool = False) -> list[Window]:
        """Moves the watermark to the latest time seen minus the lag (to infinity if ``final``)
        and evaluates every window it closed."""
        spec = self.spec
        self.watermark = math.inf if final else max(self.watermark, self.max_time - spec.lag)
        if self.watermark == -math.inf or self.max_time == -math.inf:
            return []  # nothing seen yet: no window can be closed
        # the last window the watermark closed (its end <= watermark); at the end, every window
        # that holds an item
        upto = spec.last_index(self.max_time) if final else math.floor((self.watermark - spec.length) / spec.slide)
        done = self._fired_upto
        if done is not None and upto <= done:
            return []
        # only windows that hold items: a far jump of the watermark costs nothing per empty window
        windows: dict[int, list[tuple[float, int, Any]]] = {}
        for entry in self._items:
            lo = spec.first_index(entry[0]) if done is None else max(spec.first_index(entry[0]), done + 1)
            for k in range(lo, min(spec.last_index(entry[0]), upto) + 1):
                windows.setdefault(k, []).append(entry)
        self._fired_upto = upto
        out = []
        for k in sorted(windows):
            lo_t, hi_t = spec.bounds(k)
            out.append(Window(lo_t, hi_t, [item for (_, _, item) in sorted(windows[k])]))
        return out

    def evictable(self) -> list[Any]:
        """Items whose every window has been evaluated (the bolt acks them)."""
        out = []
        while self._items and self._fired_upto is not None \
                and self.spec.last_index(self._items[0][0]) <= self._fired_upto:
            out.append(heapq.heappop(self._items)[2])
        return out

    def pending(self) -> int:
        return len(self._items)

