"""An event-time window bolt: Storm's BaseWindowedBolt with a timestamp field, a lag and a
late-tuple stream, in heronpy's style (``processWindow(window_info, tuples)``).

Config keys (component config):
- ``heron_py.window.length.secs``: window length, event-time seconds (required);
- ``heron_py.window.slide.secs``: slide (default: the length, i.e. tumbling windows);
- ``heron_py.window.timestamp.field``: the input field holding the event time in seconds
  (or override ``get_timestamp(tup)``);
- ``heron_py.window.lag.secs``: how far behind the latest event time a tuple may come and still
  count (Storm's ``withLag``; default 0);
- ``heron_py.window.late.stream``: a stream the bolt declares, on which late tuples are emitted
  with their own values, anchored (Storm's ``withLateTupleStream``); unset: late tuples are
  logged and counted only;
- ``heron_py.window.watermark.interval.secs``: how often the watermark moves and closed windows
  are evaluated (the bolt's tick rate; default 1).

Every tuple is acked once no window can need it any more (late tuples: at once).
The window logic itself is heron_py.api.bolt.event_windows, pure and property-tested.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from heron_py.api import api_constants
from heron_py.api.bolt.bolt import Bolt
from heron_py.api.bolt.event_windows import EventTimeWindows, WindowSpec
from heron_py.api.bolt.window_bolt import WindowContext


def _number(config: dict[str, Any], key: str, default: float | None, bolt: str) -> float:
    raw = config.get(key, default)
    try:
        if raw is None or isinstance(raw, bool):
            raise ValueError
        return float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{bolt}: config {key}: expected a number of seconds, found {raw!r}") from None


class EventTimeWindowBolt(Bolt):
    WINDOW_LENGTH_SECS = "heron_py.window.length.secs"
    WINDOW_SLIDE_SECS = "heron_py.window.slide.secs"
    TIMESTAMP_FIELD = "heron_py.window.timestamp.field"
    LAG_SECS = "heron_py.window.lag.secs"
    LATE_STREAM = "heron_py.window.late.stream"
    WATERMARK_INTERVAL_SECS = "heron_py.window.watermark.interval.secs"

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        name = type(self).__name__
        length = _number(config, self.WINDOW_LENGTH_SECS, None, name)
        slide = _number(config, self.WINDOW_SLIDE_SECS, length, name)
        try:
            spec = WindowSpec(length, slide, _number(config, self.LAG_SECS, 0.0, name))
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
        self.windows = EventTimeWindows(spec)
        self.late_stream: str | None = config.get(self.LATE_STREAM) or None
        self.late_tuples = 0
        self._field_index = self._timestamp_index(config, context, name)
        interval = _number(config, self.WATERMARK_INTERVAL_SECS, 1.0, name)
        config[api_constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = str(interval)

    @staticmethod
    def _timestamp_index(config: dict[str, Any], context: Any, bolt: str) -> dict[tuple[str, str], int]:
        """(source component, stream) -> position of the timestamp field in its tuples."""
        field_name = config.get(EventTimeWindowBolt.TIMESTAMP_FIELD)
        if not field_name:
            return {}
        out = {}
        topo = context.topology
        for sid in context.get_this_sources() or {}:
            fields = next(s.fields for s in topo.component(sid.component_name).outputs if s.name == sid.id)
            if field_name not in fields:
                raise ValueError(f"{bolt}: config {EventTimeWindowBolt.TIMESTAMP_FIELD}: input stream "
                                 f"{sid.component_name}/{sid.id} has no field '{field_name}' (fields: {list(fields)})")
            out[(sid.component_name, sid.id)] = fields.index(field_name)
        return out

    def get_timestamp(self, tup: Any) -> float:
        """The tuple's event time in seconds; override to compute it otherwise."""
        index = self._field_index.get((tup.component, tup.stream))
        if index is None:
            raise ValueError(f"{type(self).__name__}: no {self.TIMESTAMP_FIELD} configured for input "
                             f"{tup.component}/{tup.stream}; set it or override get_timestamp()")
        return float(tup.values[index])

    def process(self, tup: Any) -> None:
        t = self.get_timestamp(tup)
        if self.windows.add(t, tup):
            return
        self.late_tuples += 1
        if self.late_stream is not None:
            self.emit(list(tup.values), stream=self.late_stream, anchors=[tup])
        else:
            self.log(f"late tuple (event time {t:g} < watermark {self.windows.watermark:g}): {tup.values}")
        self.ack(tup)

    def process_tick(self, tup: Any) -> None:
        for w in self.windows.advance():
            self.processWindow(WindowContext(w.start, w.end), w.items)
        for done in self.windows.evictable():
            self.ack(done)

    @abstractmethod
    def processWindow(self, window_info: WindowContext, tuples: list[Any]) -> None:
        """Called once per closed window with its bounds (event time) and its tuples."""
