"""Event-time windows (heron_py/api/bolt/event_windows.py): Hypothesis properties against an
independent model, and the bolt around them in-process."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heron_py.api.bolt.event_window_bolt import EventTimeWindowBolt
from heron_py.api.bolt.event_windows import EventTimeWindows, WindowSpec
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping, Stream
from heron_py.api.topology import TopologyBuilder
from heron_py.testing import run_in_process


@st.composite
def runs(draw, tumbling: bool = False):
    length = draw(st.integers(1, 8))
    slide = length if tumbling else draw(st.integers(1, length))
    lag = draw(st.integers(0, 5))
    # event times that mostly grow, with some out of order; None: the watermark moves
    steps = draw(st.lists(st.one_of(st.integers(0, 60), st.none()), max_size=80))
    return WindowSpec(length, slide, lag), steps


def _windows_holding(spec: WindowSpec, t: int) -> set[tuple[float, float]]:
    # brute force over every window index near t, independent of first_index/last_index
    out = set()
    for k in range(-20, 200):
        lo, hi = k * spec.slide, k * spec.slide + spec.length
        if lo <= t < hi:
            out.add((lo, hi))
    return out


def _replay(spec: WindowSpec, steps: list[int | None]):
    w = EventTimeWindows(spec)
    fired: list = []
    accepted, late = [], []
    closed_end = -math.inf  # the model: every window ending at or before this is closed
    max_t = -math.inf
    for i, t in enumerate(steps):
        if t is None:
            if max_t > -math.inf:
                closed_end = max(closed_end, max_t - spec.lag)
            fired.extend(w.advance())
            continue
        item = (i, t)
        model_late = any(hi <= closed_end for (_, hi) in _windows_holding(spec, t))
        ok = w.add(t, item)
        assert ok == (not model_late), (t, closed_end)
        (accepted if ok else late).append(item)
        max_t = max(max_t, t)
    fired.extend(w.advance(final=True))
    return w, fired, accepted, late


def _check(spec: WindowSpec, steps: list[int | None]) -> None:
    w, fired, accepted, late = _replay(spec, steps)
    bounds = [(f.start, f.end) for f in fired]
    assert bounds == sorted(set(bounds)), "each window once, oldest first"
    where: dict = {}
    for f in fired:
        for item in f.items:
            where.setdefault(item, set()).add((f.start, f.end))
    for item in accepted:
        assert where.get(item, set()) == _windows_holding(spec, item[1])
    for item in late:
        assert item not in where
    assert sorted(w.evictable()) == sorted(accepted)  # after the last window nothing is kept
    assert w.pending() == 0


@settings(max_examples=300, deadline=None)
@given(runs())
def test_sliding_every_tuple_in_exactly_its_windows_and_late_ones_in_none(run) -> None:
    _check(*run)


@settings(max_examples=200, deadline=None)
@given(runs(tumbling=True))
def test_tumbling_every_accepted_tuple_in_exactly_one_window(run) -> None:
    spec, steps = run
    _check(spec, steps)
    _, fired, accepted, _ = _replay(spec, steps)
    assert sorted(i for f in fired for i in f.items) == sorted(accepted)


def test_a_far_watermark_jump_costs_nothing_per_empty_window() -> None:
    w = EventTimeWindows(WindowSpec(1.0, 1.0))
    w.add(0.5, "a")
    w.add(1e12, "b")
    assert [(x.start, x.end, x.items) for x in w.advance()] == [(0.0, 1.0, ["a"])]
    assert w.evictable() == ["a"]


@pytest.mark.parametrize(("args", "message"), [
    ((0, 1), "event-time window: length must be a number of seconds > 0, found 0"),
    ((2, 3), "event-time window: slide (3) must not be above length (2)"),
    ((2, 1, -1), "event-time window: lag must be a number of seconds >= 0, found -1"),
])
def test_bad_window_specs(args, message) -> None:
    with pytest.raises(ValueError) as e:
        WindowSpec(*args)
    assert str(e.value) == message


EVENTS = [(1.0, "a"), (2.5, "b"), (4.0, "c"), (9.0, "d"), (12.0, "e")]


class EventSpout(Spout):
    outputs = ["ts", "word"]

    def initialize(self, config, context):
        self.events = list(EVENTS)

    def next_tuple(self):
        if self.events:
            self.emit(list(self.events.pop(0)))


class WordsBolt(EventTimeWindowBolt):
    outputs = [Stream(fields=["ts", "word"], name="late"), Stream(fields=["window", "words"])]

    def processWindow(self, window_info, tuples):
        self.emit([f"{window_info.start:g}-{window_info.end:g}", [t.values[1] for t in tuples]])


def test_the_bolt_windows_by_event_time_in_a_topology() -> None:
    from tests.unit.api.test_serializer import CountingBolt  # a bolt that keeps what it got

    b = TopologyBuilder("ev")
    s = b.add_spout("s", EventSpout, par=1)
    w = b.add_bolt("w", WordsBolt, par=1, inputs={s: Grouping.SHUFFLE},
                   config={WordsBolt.WINDOW_LENGTH_SECS: 4, WordsBolt.WINDOW_SLIDE_SECS: 2,
                           WordsBolt.TIMESTAMP_FIELD: "ts", WordsBolt.LAG_SECS: 1, WordsBolt.LATE_STREAM: "late"})
    b.add_bolt("out", CountingBolt, par=1, inputs={w: Grouping.SHUFFLE})
    # every event arrives before the first tick: the watermark is then 12 - 1 = 11, so the
    # windows ending at or before 11 close
    res = run_in_process(b, capture=["out"], ticks=1)
    assert res.values("out") == [["-2-2", ["a"]], ["0-4", ["a", "b"]], ["2-6", ["b", "c"]], ["4-8", ["c"]],
                                 ["6-10", ["d"]]]


class Recorder:
    """A delegate that records what the bolt emits and acks."""

    def __init__(self):
        self.emitted, self.acked, self.logged = [], [], []

    def emit(self, tup, stream="default", anchors=None, direct_task=None, need_task_ids=False, tup_id=None):
        self.emitted.append((stream, list(tup), [a.values[1] for a in anchors or []]))

    def ack(self, tup):
        self.acked.append(tup.values[1])

    def fail(self, tup):
        raise AssertionError("no fails expected")

    def log(self, message, level=None):
        self.logged.append(message)


class FirstValueTime(WordsBolt):
    def get_timestamp(self, tup):
        return tup.values[0]


def _tuple(ts, word):
    from heron_py.api.tuple import HeronTuple

    return HeronTuple(None, "s", "default", 1, [ts, word], 0.0, None)


@pytest.mark.parametrize("late_stream", ["late", None])
def test_late_tuples_go_to_the_late_stream_and_every_tuple_is_acked_once(late_stream) -> None:
    rec = Recorder()
    bolt = FirstValueTime(rec)
    config = {WordsBolt.WINDOW_LENGTH_SECS: 2, WordsBolt.LAG_SECS: 0}
    if late_stream:
        config[WordsBolt.LATE_STREAM] = late_stream
    bolt.initialize(config, None)
    assert config["topology.tick.tuple.freq.secs"] == "1.0"
    for ts, word in [(0.5, "a"), (2.5, "b"), (4.1, "c")]:
        bolt.process(_tuple(ts, word))
    bolt.process_tick(None)  # watermark 4.1: windows [0,2) and [2,4) close
    bolt.process(_tuple(1.0, "late"))  # its window [0,2) was evaluated
    bolt.process(_tuple(4.5, "on-time"))
    bolt.process_tick(None)
    windows = [e[1] for e in rec.emitted if e[0] == "default"]
    assert windows == [["0-2", ["a"]], ["2-4", ["b"]]]
    if late_stream:
        assert [e for e in rec.emitted if e[0] == "late"] == [("late", [1.0, "late"], ["late"])]
    else:
        assert rec.logged == ["late tuple (event time 1 < watermark 4.1): [1.0, 'late']"]
    assert rec.acked == ["a", "b", "late"] and bolt.late_tuples == 1
    assert bolt.windows.pending() == 2  # c and on-time wait for [4,6) to close


def test_a_missing_timestamp_field_is_refused_at_initialize() -> None:
    from heron_py.testing import run_in_process as run

    b = TopologyBuilder("ev")
    s = b.add_spout("s", EventSpout, par=1)
    b.add_bolt("w", WordsBolt, par=1, inputs={s: Grouping.SHUFFLE},
               config={WordsBolt.WINDOW_LENGTH_SECS: 4, WordsBolt.TIMESTAMP_FIELD: "time"})
    with pytest.raises(ValueError) as e:
        run(b)
    assert str(e.value) == ("WordsBolt: config heron_py.window.timestamp.field: input stream s/default has no "
                            "field 'time' (fields: ['ts', 'word'])")
