"""Event-time windows (Storm's BaseWindowedBolt with a timestamp field, a lag and a late-tuple
stream): clicks per page in tumbling 10 s windows of the clicks' own time, 5 s of lag allowed.
The spout makes 100 clicks per second of event time, 10 event-time seconds per second of wall
time (the watermark moves once a wall-clock second), and sends every 50th click 30 s late: its
window was already evaluated, so it goes to the "late" stream.

    heron-py submit local examples/event_time_windows.py
    heron-py logs local event_time_windows count     # "window [1000.0, 1010.0): a=..., b=..."
    heron-py logs local event_time_windows late      # the late clicks
    heron-py kill local event_time_windows
"""
import time

from heron_py.api.bolt.event_window_bolt import EventTimeWindowBolt
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping, Stream
from heronpy.api.topology import TopologyBuilder


class ClickSpout(Spout):
    outputs = ["page", "ts"]

    def initialize(self, config, context):
        self.n = 0
        self.start = time.monotonic()

    def next_tuple(self):
        if self.n >= 20000 or self.n >= (time.monotonic() - self.start) * 1000:
            return
        ts = 1000.0 + self.n * 0.01  # 100 clicks per event-time second
        if self.n % 50 == 49:
            ts -= 30.0  # late: its window closed long ago
        self.emit(["abc"[self.n % 3], ts])
        self.n += 1


class CountWindow(EventTimeWindowBolt):
    outputs = [Stream(fields=["page", "ts"], name="late")]

    def processWindow(self, window_info, tuples):
        counts = {}
        for t in tuples:
            counts[t.values[0]] = counts.get(t.values[0], 0) + 1
        shown = ", ".join(f"{k}={v}" for k, v in sorted(counts.items()))
        self.log(f"window [{window_info.start}, {window_info.end}): {shown}")


class LateLog(Bolt):
    def process(self, tup):
        self.log(f"late click: {tup.values}")


if __name__ == "__main__":
    builder = TopologyBuilder("event_time_windows")
    clicks = builder.add_spout("click", ClickSpout, par=1)
    count = builder.add_bolt("count", CountWindow, par=1, inputs={clicks: Grouping.SHUFFLE}, config={
        CountWindow.WINDOW_LENGTH_SECS: 10, CountWindow.TIMESTAMP_FIELD: "ts", CountWindow.LAG_SECS: 5,
        CountWindow.LATE_STREAM: "late"})
    builder.add_bolt("late", LateLog, par=1, inputs={count["late"]: Grouping.SHUFFLE})
    builder.build_and_submit()
