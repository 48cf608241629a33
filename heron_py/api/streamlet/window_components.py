"""The windowed operators' bolts, on heronpy's SlidingWindowBolt (heron_py.api.bolt.window_bolt):
every slide interval they compute over the elements of the last window duration and emit
(Window, result) or (KeyedWindow, result), as heronpy's. Empty windows emit nothing."""

from __future__ import annotations

from typing import Any

from heron_py.api.bolt.window_bolt import SlidingWindowBolt, WindowContext
from heron_py.api.streamlet import windowing
from heron_py.api.streamlet.components import FUNCTION, OUTPUT_STREAM, PARENTS, StreamletBolt
from heron_py.api.streamlet.window import KeyedWindow, Window

JOIN_TYPE = "join_type"


class _WindowedBolt(SlidingWindowBolt, StreamletBolt):
    WINDOWDURATION = SlidingWindowBolt.WINDOW_DURATION_SECS  # heronpy's aliases
    SLIDEINTERVAL = SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        super().initialize(config, context)
        self._where = f"streamlet '{context.get_component_id()}'"
        self._fn = self._load(config, context, FUNCTION)

    def _emit_keyed(self, window_info: WindowContext, results: list[tuple[Any, Any]]) -> None:
        window = Window(window_info.start, window_info.end)
        for key, result in results:
            self.emit([(KeyedWindow(key, window), result)], stream=OUTPUT_STREAM)


class ReduceByWindowBolt(_WindowedBolt):
    def processWindow(self, window_info: WindowContext, tuples: list[Any]) -> None:
        if tuples:
            result = windowing.reduce_values(self._fn, [t.values[0] for t in tuples])
            self.emit([(Window(window_info.start, window_info.end), result)], stream=OUTPUT_STREAM)


class ReduceByKeyAndWindowBolt(_WindowedBolt):
    def processWindow(self, window_info: WindowContext, tuples: list[Any]) -> None:
        results = windowing.reduce_by_key(self._where, self._fn, (t.values[0] for t in tuples))
        self._emit_keyed(window_info, results)


class JoinBolt(_WindowedBolt):
    """Joins the elements of its first parent (left) with those of its second (right)."""

    OUTER_LEFT = windowing.JoinType.OUTER_LEFT
    INNER = windowing.JoinType.INNER
    OUTER_RIGHT = windowing.JoinType.OUTER_RIGHT
    OUTER = windowing.JoinType.OUTER

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        super().initialize(config, context)
        self._join_type = windowing.JoinType(int(config[JOIN_TYPE]))
        self._left = str(config[PARENTS]).split(",")[0]

    def processWindow(self, window_info: WindowContext, tuples: list[Any]) -> None:
        left = [t.values[0] for t in tuples if t.component == self._left]
        right = [t.values[0] for t in tuples if t.component != self._left]
        self._emit_keyed(window_info, windowing.join_window(self._where, self._join_type, self._fn, left, right))
