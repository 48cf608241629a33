"""An emit with more values than its stream declares: a Storm component (a multilang shell
component on heron-py's own storm.py, a pystorm component) runs as in Storm, its consumers get
the declared fields' values and the instance counts the emits (__emit-arity-mismatch/<stream>);
one with fewer values than a consumer reads is refused; a heronpy component is refused as
heronpy refuses it."""

from __future__ import annotations

import logging
import queue
from collections import Counter

import pytest
import streamparse

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.shell import ShellBolt, ShellSpout
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.multilang.errors import ShellError
from heron_py.runtime.emitter import EmitError
from heron_py.storm.native import PystormBolt, PystormSpout
from heron_py.storm.streamparse_dsl import translate
from heron_py.testing.inprocess import run_in_process
from instance.metrics import TaskReports
from instance.queues import QueueBytes

SENTENCES = 5

# Storm's multilang API (heron-py's storm.py, found on the PYTHONPATH): a spout and a bolt
# that emit one value more than their streams declare
SPOUT_PY = f"""
import storm


class Sentences(storm.Spout):
    def initialize(self, conf, context):
        self.n = 0

    def nextTuple(self):
        if self.n < {SENTENCES}:
            storm.emit([self.n, "the cow jumped", "an extra value"])
            self.n += 1


Sentences().run()
"""

SPLIT_PY = """
import storm


class Split(storm.BasicBolt):
    def process(self, tup):
        sid, sentence = tup.values
        for word in sentence.split(" "):
            storm.emit([word, sid, len(word)])


Split().run()
"""

SHORT_PY = """
import storm


class Short(storm.BasicBolt):
    def process(self, tup):
        storm.emit([tup.values[0]])


Short().run()
"""


class Collect(Bolt):
    outputs: list[str] = []

    def process(self, tup):
        pass


class SentenceSpout(Spout):
    outputs = ["sid", "sentence"]

    def initialize(self, config, context):
        self.n = 0

    def next_tuple(self):
        if self.n < SENTENCES:
            self.emit([self.n, "the cow jumped"])
            self.n += 1


class ExtraSpout(Spout):
    """A heronpy spout emitting three values on its two-field stream."""

    outputs = ["sid", "sentence"]

    def next_tuple(self):
        self.emit([1, "the cow jumped", "an extra value"])


class PystormWords(streamparse.Spout):
    """A pystorm spout emitting three values on its two-field stream."""

    outputs = ["word", "n"]

    def initialize(self, conf, ctx):
        self.n = 0

    def next_tuple(self):
        if self.n < SENTENCES:
            self.emit([f"w{self.n}", self.n, "an extra value"])
            self.n += 1


class PystormUpper(streamparse.Bolt):
    """A pystorm consumer reading its input by field name (pystorm's namedtuple values)."""

    outputs = ["word"]

    def process(self, tup):
        self.emit([tup.values.word.upper()])


class PystormTopology(streamparse.Topology):
    words = PystormWords.spec()
    upper = PystormUpper.spec(inputs={words: streamparse.Grouping.fields("word")})


class _Outbox:
    bytes = QueueBytes(1)
    time_blocked_s = 0.0
    dropped_tuples = 0

    def qsize(self):
        return 0


def _counters(user) -> dict[str, float]:
    """The instance's metrics report of the task that ran ``user`` (instance/metrics.py)."""
    reports = TaskReports(0, "x", queue.Queue(), QueueBytes(1), _Outbox())
    reports.host = user.delegate._host
    return {k: v for k, v in reports.report()["counters"].items() if k.startswith("__emit-arity-mismatch/")}


def _shell(tmp_path, name, script):
    (tmp_path / f"{name}.py").write_text(script)
    return {"heron_py.shell.cwd": str(tmp_path)}, ["python3", f"{name}.py"]


def test_multilang_components_emitting_an_extra_value_run_and_their_consumers_get_the_declared_fields(
        tmp_path, caplog):
    conf, spout_cmd = _shell(tmp_path, "sentences", SPOUT_PY)
    _, split_cmd = _shell(tmp_path, "split", SPLIT_PY)
    b = TopologyBuilder("arity")
    spout = ShellSpout.spec(spout_cmd, outputs=["sid", "sentence"], name="sentences", config=conf)
    b.add_spec(spout)
    split = ShellBolt.spec(split_cmd, ["word", "sid"], {spout: Grouping.SHUFFLE}, par=2, name="split", config=conf)
    b.add_spec(split)
    b.add_bolt("count", Collect, 1, {split: Grouping.fields("word")})
    with caplog.at_level(logging.WARNING):
        result = run_in_process(b, capture=["split", "count"])
    # each consumer got every tuple, with the values of the fields its producer declares
    assert Counter(tuple(v) for v in result.values("split")) == Counter(
        (sid, "the cow jumped") for sid in range(SENTENCES))
    assert Counter(tuple(v) for v in result.values("count")) == Counter(
        (w, sid) for sid in range(SENTENCES) for w in ("the", "cow", "jumped"))
    # counted per stream in each task's metrics, and said once per task and stream
    users = {type(u).__name__: [] for u in result.components.values()}
    for u in result.components.values():
        users[type(u).__name__].append(u)
    assert [_counters(u) for u in users["ShellSpout"]] == [{"__emit-arity-mismatch/default": SENTENCES}]
    split_counts = [_counters(u) for u in users["ShellBolt"]]
    assert sum(c.get("__emit-arity-mismatch/default", 0) for c in split_counts) == 3 * SENTENCES
    assert _counters(users["Collect"][0]) == {}
    warned = [r.getMessage() for r in caplog.records if "__emit-arity-mismatch" in r.getMessage()]
    assert len(warned) == 1 + sum(1 for c in split_counts if c)
    assert any(w.startswith("component 'sentences' task 1 emitted 3 values on stream 'default', which declares 2 "
                            "fields ['sid', 'sentence']: sent its first 2, as Storm's consumers read them")
               for w in warned)


def test_a_multilang_emit_with_fewer_values_than_its_consumer_reads_is_refused(tmp_path):
    conf, short_cmd = _shell(tmp_path, "short", SHORT_PY)
    b = TopologyBuilder("arity_short")
    spout = b.add_spout("sentences", SentenceSpout, par=1)
    short = ShellBolt.spec(short_cmd, ["word", "sid"], {spout: Grouping.SHUFFLE}, name="short", config=conf)
    b.add_spec(short)
    b.add_bolt("count", Collect, 1, {short: Grouping.fields("word")})
    with pytest.raises(ShellError, match=r"emitted 1 values on stream 'default', which declares 2 fields "
                                         r"\['word', 'sid'\], and its consumers \['count'\] would read a missing "
                                         r"field"):
        run_in_process(b)


def test_a_heronpy_component_emitting_an_extra_value_is_refused_as_heronpy_refuses_it():
    b = TopologyBuilder("arity_heronpy")
    spout = b.add_spout("extra", ExtraSpout, par=1)
    b.add_bolt("count", Collect, 1, {spout: Grouping.SHUFFLE})
    with pytest.raises(EmitError) as e:
        run_in_process(b)
    assert str(e.value) == ("component 'extra' emitted 3 values on stream 'default', which declares 2 fields "
                            "['sid', 'sentence']")


def test_a_pystorm_component_emitting_an_extra_value_runs_and_its_consumer_reads_its_fields_by_name():
    result = run_in_process(translate(PystormTopology), capture=["upper"])
    assert sorted(v for v in result.values("upper")) == [[f"w{n}", n] for n in range(SENTENCES)]
    spouts = [u for u in result.components.values() if isinstance(u, PystormSpout)]
    assert [_counters(u) for u in spouts] == [{"__emit-arity-mismatch/default": SENTENCES}]
    bolts = [u for u in result.components.values() if isinstance(u, PystormBolt)]
    assert [_counters(u) for u in bolts] == [{}]
