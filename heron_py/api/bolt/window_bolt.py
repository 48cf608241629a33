"""heronpy's window bolts: ``SlidingWindowBolt`` and ``TumblingWindowBolt``.

A subclass implements ``processWindow(window_info, tuples)``; the bolt keeps the tuples of the
current window and calls it on every tick. The tick rate is set in ``initialize`` (heronpy's
way: the bolt writes ``topology.tick.tuple.freq.secs`` into its config there), and the
component host reads the rate after ``initialize`` returns.

Processing time, whole seconds, as heronpy: a tuple's time is when ``process`` saw it.
- Sliding: every slide interval, the tuples of the last duration seconds; a tuple is acked when
  it leaves the window (its time is more than the duration ago).
- Tumbling: every duration, the tuples since the last call; all are acked after it.

Both are heronpy ``StatefulComponent``s: with a saved state (effectively once) they restore
their tuples from it.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections import deque, namedtuple
from typing import Any

from heron_py.api import api_constants
from heron_py.api.bolt.bolt import Bolt
from heron_py.api.state.stateful_component import StatefulComponent

WindowContext = namedtuple("WindowContext", ("start", "end"))


def _seconds(config: dict[str, Any], key: str, bolt: str) -> int:
    raw = config.get(key)
    try:
        value = int(raw) if raw is not None and not isinstance(raw, bool) else None
    except (TypeError, ValueError):
        value = None
    if value is None or value < 1:
        raise ValueError(f"{bolt}: config {key}: expected a window length in whole seconds >= 1, found {raw!r}")
    return value


class _WindowBolt(Bolt, StatefulComponent):
    # state['tuples'] is the window, not keyed: it cannot be split over another parallelism
    heron_state_rescale = "refuse"
    # the wall clock in whole seconds (heronpy's); tests replace it
    clock = staticmethod(time.time)
    current_tuples: deque[Any]

    def init_state(self, stateful_state: Any) -> None:
        self.saved_state = stateful_state

    def pre_save(self, checkpoint_id: str) -> None:
        self.saved_state["tuples"] = self.current_tuples

    def _restore(self) -> deque[Any]:
        saved = getattr(self, "saved_state", None)
        if saved is not None and "tuples" in saved:
            return deque(saved["tuples"])
        return deque()

    def _now(self) -> int:
        return int(self.clock())

    @abstractmethod
    def processWindow(self, window_info: WindowContext, tuples: list[Any]) -> None:
        """Called with the window's bounds and its tuples."""


class SlidingWindowBolt(_WindowBolt):
    WINDOW_DURATION_SECS = "slidingwindowbolt_duration_secs"
    WINDOW_SLIDEINTERVAL_SECS = "slidingwindowbolt_slideinterval_secs"

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        name = type(self).__name__
        self.window_duration = _seconds(config, self.WINDOW_DURATION_SECS, name)
        if config.get(self.WINDOW_SLIDEINTERVAL_SECS) is None:
            self.slide_interval = self.window_duration
        else:
            self.slide_interval = _seconds(config, self.WINDOW_SLIDEINTERVAL_SECS, name)
        if self.slide_interval > self.window_duration:
            raise ValueError(f"{name}: config {self.WINDOW_SLIDEINTERVAL_SECS} ({self.slide_interval}) must not be "
                             f"above {self.WINDOW_DURATION_SECS} ({self.window_duration})")
        config[api_constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = str(self.slide_interval)
        self.current_tuples = self._restore()  # (tuple, time seen) pairs

    def process(self, tup: Any) -> None:
        now = self._now()
        self.current_tuples.append((tup, now))
        self._expire(now)

    def _expire(self, now: int) -> None:
        q = self.current_tuples
        while q and now - self.window_duration > q[0][1]:
            self.ack(q.popleft()[0])

    def process_tick(self, tup: Any) -> None:
        now = self._now()
        self.processWindow(WindowContext(now - self.window_duration, now), [t for t, _ in self.current_tuples])
        self._expire(now)


class TumblingWindowBolt(_WindowBolt):
    WINDOW_DURATION_SECS = "tumblingwindowbolt_duration_secs"

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.window_duration = _seconds(config, self.WINDOW_DURATION_SECS, type(self).__name__)
        config[api_constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = str(self.window_duration)
        self.current_tuples = self._restore()

    def process(self, tup: Any) -> None:
        self.current_tuples.append(tup)

    def process_tick(self, tup: Any) -> None:
        now = self._now()
        window = list(self.current_tuples)
        self.processWindow(WindowContext(now - self.window_duration, now), window)
        for t in window:
            self.ack(t)
        self.current_tuples.clear()
