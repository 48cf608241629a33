"""pystorm components run natively (heron_py.storm.native): their messages reach our delegate
in process, with pystorm's semantics (auto_ack, auto_anchor, auto_fail, batching, ticks,
need_task_ids, logging, errors)."""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path

import pytest
from streamparse import BatchingBolt, Bolt, Grouping, Spout, Stream, TicklessBatchingBolt, Topology

from heron_py.api.topology_context import TopologyContext
from heron_py.api.tuple import HeronTuple
from heron_py.common.config_codec import restore_config
from heron_py.planner.packing import round_robin
from heron_py.storm.native import PystormBolt, PystormSpout
from heron_py.storm.project import add_project_paths
from heron_py.storm.streamparse_dsl import translate
from heron_py.testing import run_in_process

PROJECT = Path(__file__).resolve().parents[3] / "examples" / "streamparse" / "wordcount"


class Delegate:
    """Records what the adapter hands the runtime."""

    def __init__(self) -> None:
        self.logger = logging.getLogger("test-task")
        self.emits: list[tuple] = []
        self.acked: list = []
        self.failed: list = []

    def emit(self, tup, stream, anchors, direct_task, need_task_ids, tup_id):
        self.emits.append((list(tup), stream, anchors, direct_task, need_task_ids, tup_id))
        return [7, 8] if need_task_ids else None

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)

    def log(self, message, level=None):
        self.logger.info(message)


class Words(Spout):
    outputs = ["word"]

    def initialize(self, conf, ctx):
        self.words = iter(conf.get("words", "a b c").split())
        self.acks: list = []
        self.fails: list = []

    def next_tuple(self):
        w = next(self.words, None)
        if w is not None:
            self.emit([w], tup_id=f"id-{w}")

    def ack(self, tup_id):
        self.acks.append(tup_id)

    def fail(self, tup_id):
        self.fails.append(tup_id)


class Upper(Bolt):
    outputs = ["word", Stream(["tasks"], name="tasks")]

    def initialize(self, conf, ctx):
        self.seen: list = []

    def process(self, tup):
        self.seen.append(tup)
        if tup.values.word == "boom":
            raise ValueError("boom word")
        # two emits per input (what streamparse's old emit_many did)
        for w in (tup.values.word.upper(), tup.values[0]):
            self.emit([w])
        if tup.values.word == "ids":
            tasks = self.emit(["x"], need_task_ids=True)
            self.emit([tasks], stream="tasks")
        self.logger.info("processed %s", tup.values.word)
        self.log("via storm log", level="warn")


class Manual(Bolt):
    auto_ack = False
    auto_anchor = False
    auto_fail = False
    outputs = ["word"]

    def process(self, tup):
        if tup.values[0] == "boom":
            raise ValueError("manual boom")
        self.emit([tup.values[0]])
        self.fail(tup) if tup.values[0] == "bad" else self.ack(tup)


class Batches(BatchingBolt):
    outputs = ["key", "n"]
    ticks_between_batches = 1

    def group_key(self, tup):
        return tup.values[0]

    def process_batch(self, key, tups):
        self.emit([key, len(tups)])


class Tickless(TicklessBatchingBolt):
    outputs = ["n"]
    secs_between_batches = 0.0

    def process_batch(self, key, tups):
        self.emit([len(tups)])


class Forgiving(Bolt):
    exit_on_exception = False
    outputs = ["word"]

    def process(self, tup):
        raise RuntimeError("keeps going")


class T(Topology):
    spout = Words.spec()
    upper = Upper.spec(inputs={spout: Grouping.fields("word")})
    manual = Manual.spec(inputs=[spout])
    batches = Batches.spec(inputs=[spout], config={"topology.tick.tuple.freq.secs": 1})
    tickless = Tickless.spec(inputs=[spout])
    forgiving = Forgiving.spec(inputs=[spout])
    sink = Upper.spec(inputs=[upper])


def _adapter(name: str, delegate: Delegate):
    topo = translate(T)
    comp = topo.component(name)
    conf = restore_config({**topo.config, **comp.config})
    packing = round_robin(topo, 1)
    task = next(t.task_id for t in packing.tasks if t.component == name)
    cls = PystormSpout if comp.kind.value == "spout" else PystormBolt
    adapter = cls(delegate)
    adapter.initialize(conf, TopologyContext(topo, packing, task, conf))
    return adapter


def _tup(word, component="spout", stream="default"):
    return HeronTuple(None, component, stream, 1, [word], 0.0, None)


def test_auto_anchor_and_auto_ack_with_namedtuple_values():
    d = Delegate()
    bolt = _adapter("upper", d)
    t = _tup("hi")
    bolt.process(t)
    assert [e[:3] for e in d.emits] == [(["HI"], "default", [t]), (["hi"], "default", [t])]
    assert d.acked == [t] and not d.failed
    seen = bolt.pystorm.seen[0]
    assert seen.values.word == "hi" and seen.component == "spout" and seen.task == 1
    assert bolt.link.ids == {}  # acked: nothing kept


def test_exception_auto_fails_reports_and_kills_the_task(caplog):
    d = Delegate()
    bolt = _adapter("upper", d)
    t = _tup("boom")
    with caplog.at_level(logging.INFO), pytest.raises(ValueError, match="boom word"):
        bolt.process(t)
    assert d.failed == [t] and not d.acked
    text = caplog.text
    assert "Exception in Upper.run()" in text
    assert "Python ValueError raised while processing Tuple Tuple(id='1', component='spout'" in text
    assert "Traceback (most recent call last)" in text


def test_exit_on_exception_false_keeps_the_task():
    d = Delegate()
    bolt = _adapter("forgiving", d)
    t = _tup("a")
    bolt.process(t)  # no raise
    assert d.failed == [t]


def test_manual_ack_fail_and_no_anchor():
    d = Delegate()
    bolt = _adapter("manual", d)
    good, bad = _tup("ok"), _tup("bad")
    bolt.process(good)
    bolt.process(bad)
    assert [e[2] for e in d.emits] == [[], []]  # auto_anchor off: unanchored
    assert d.acked == [good] and d.failed == [bad]
    with pytest.raises(ValueError):
        bolt.process(_tup("boom"))
    assert len(d.failed) == 1  # auto_fail off: the tuple is not failed


def test_need_task_ids_and_logging(caplog):
    d = Delegate()
    bolt = _adapter("upper", d)
    with caplog.at_level(logging.DEBUG):
        bolt.process(_tup("ids"))
    assert d.emits[2][:5] == (["x"], "default", d.emits[2][2], None, True)
    assert d.emits[3][:2] == ([[7, 8]], "tasks")
    records = {(r.name, r.levelno, r.getMessage()) for r in caplog.records}
    assert ("pystorm.component.upper", logging.INFO, "processed ids") in records
    assert ("test-task", logging.WARNING, "via storm log") in records


def test_batching_bolt_batches_on_ticks():
    d = Delegate()
    bolt = _adapter("batches", d)
    ins = [_tup(w) for w in ["a", "b", "a"]]
    for t in ins:
        bolt.process(t)
    bolt.process_tick(None)
    assert d.emits == []  # pystorm: a batch after more than ticks_between_batches ticks
    bolt.process_tick(None)
    assert sorted(e[0] for e in d.emits) == [["a", 2], ["b", 1]]
    assert {id(e[2][0]) for e in d.emits if e[0][0] == "a"} <= {id(ins[0]), id(ins[2])}
    assert sorted(map(id, d.acked)) == sorted(map(id, ins))


def test_tickless_batching_bolt_runs_batches_from_heron_poll():
    d = Delegate()
    bolt = _adapter("tickless", d)
    assert bolt.pystorm._batcher is None  # no timer thread
    bolt.process(_tup("a"))
    bolt.process(_tup("b"))
    assert d.emits == []
    bolt.heron_poll()
    assert [e[0] for e in d.emits] == [[2]] and len(d.acked) == 2


def test_spout_ids_acks_and_fails():
    d = Delegate()
    spout = _adapter("spout", d)
    spout.next_tuple()
    assert d.emits[0][0] == ["a"] and d.emits[0][5] == "id-a"
    spout.ack("id-a")
    spout.fail("id-b")
    assert spout.pystorm.acks == ["id-a"] and spout.pystorm.fails == ["id-b"]


def test_word_count_project_in_process_is_exact():
    add_project_paths(PROJECT / "topologies" / "wordcount_bounded.py")
    from bolts.wordcount import WordCountBolt
    from spouts.bounded_words import BoundedWordSpout, bounded_words

    class Sink(Bolt):
        outputs: list = []

        def process(self, tup):
            pass

    class WC(Topology):
        config = {"wordcount.words": 1000}
        word_spout = BoundedWordSpout.spec()
        count_bolt = WordCountBolt.spec(inputs={word_spout: Grouping.fields("word")}, par=2)

    res = run_in_process(translate(WC), capture=["count_bolt"])
    assert Counter(v[0] for v in res.values("count_bolt")) == Counter(bounded_words(1000))
    counters = Counter()
    for comp in res.components.values():
        if isinstance(comp, PystormBolt):
            counters.update(comp.pystorm.counter)
    expected = Counter()
    for w in bounded_words(1000):
        expected[w] += 10 if w == "dog" else 1
    assert counters == expected
