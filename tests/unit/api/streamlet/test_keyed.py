"""Keyed aggregation without a window (heron_py/api/streamlet/keyed.py): reduce_by_key and
count_by_key compiled from Streamlet programs and run in process; their emit modes; the
acking of source tuples through the operator on real hosts and the stream manager's real
XOR acker; the state saved at a checkpoint and restored by the real StatefulTask; the one
error each mistake gives."""

from __future__ import annotations

import collections
import logging
import pickle

import pytest

from heron_py.api.component.component_spec import GlobalStreamId
from heron_py.api.stream import Grouping
from heron_py.api.streamlet import functions, keyed
from heron_py.api.streamlet.builder import Builder
from heron_py.api.streamlet.components import OUTPUT_STREAM, StreamletBolt, StreamletSpout
from heron_py.api.streamlet.config import Config
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.streamlet.groupings import KeyFunctionGrouping
from heron_py.api.streamlet.runner import build_topology
from heron_py.api.topology import TopologyBuilder
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import BODY_OFFSET, MsgType, encode_batch_frame, encode_marker, frame_type
from heron_py.common.serialization import dumps_batch, loads_batch
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import HostOptions, make_host
from heron_py.runtime.stateful import StatefulTask
from heron_py.testing import run_in_process
from tests.fakes import HostPipeline, Items
from tests.support import mark_saved

LOG = logging.getLogger("test")
TEXT = ["the cat sat", "the dog sat on the cat", "a cat"]
WORDS = [w for line in TEXT for w in line.split()]



def run(builder, capture, ticks=0):
    return run_in_process(build_topology("t", Config(), builder), capture=capture, ticks=ticks)


def pairs(result, component):
    return [tuple(r.values[0]) for r in result.received[component]]


# --- semantics, compiled from Streamlet programs and run in process ---

def test_count_by_key_update_emits_each_new_count_and_each_key_lives_in_one_task():
    b = Builder()
    b.new_source(Items(TEXT)).flat_map(str.split).count_by_key(lambda w: w).set_num_partitions(3).log()
    r = run(b, ["log-1"])
    got = pairs(r, "log-1")
    assert len(got) == len(WORDS)
    per_key = collections.defaultdict(list)
    for w, n in got:
        per_key[w].append(n)
    # each key's counts are 1, 2, 3, ... once each (log() is shuffled over 3 tasks: not in order)
    assert {w: sorted(ns) for w, ns in per_key.items()} == {
        w: list(range(1, c + 1)) for w, c in collections.Counter(WORDS).items()}
    tasks = collections.defaultdict(set)
    for rec in r.received["log-1"]:
        tasks[rec.values[0][0]].add(rec.source_task)
    assert all(len(t) == 1 for t in tasks.values()) and len(set().union(*tasks.values())) > 1


def test_reduce_by_key_with_value_fn_reduces_from_the_first_value():
    b = Builder()
    b.new_source(Items(["a1", "b20", "a300", "b4000"])) \
        .reduce_by_key(lambda s: s[0], lambda x, y: x + y, value_fn=lambda s: int(s[1:])).log()
    assert pairs(run(b, ["log-1"]), "log-1") == [("a", 1), ("b", 20), ("a", 301), ("b", 4020)]


def test_reduce_by_key_without_value_fn_reduces_the_elements():
    b = Builder()
    b.new_source(Items(["x", "yy", "z"])).reduce_by_key(len, lambda a, c: a + "|" + c).log()
    assert pairs(run(b, ["log-1"]), "log-1") == [(1, "x"), (2, "yy"), (1, "x|z")]


def test_tick_mode_emits_the_changed_keys_once_per_tick_and_sets_the_tick_rate():
    b = Builder()
    b.new_source(Items(TEXT)).flat_map(str.split).count_by_key(str.upper, emit="tick", tick_secs=0.5).log()
    expected = sorted((w.upper(), c) for w, c in collections.Counter(WORDS).items())
    # no tick: run_in_process ends the bolts gracefully, and the close emits what is pending once
    r = run(b, ["log-1"], ticks=0)
    assert sorted(pairs(r, "log-1")) == expected
    # the first tick emits every changed key; the second tick and the close find nothing changed
    r = run(b, ["log-1"], ticks=2)
    assert sorted(pairs(r, "log-1")) == expected
    [bolt] = [c for c in r.components.values() if isinstance(c, keyed.CountByKeyBolt)]
    assert bolt._mode == "tick"


# --- a harness of real hosts: a spout with message ids, the keyed bolt, a sink, the acker ---

def key_or_raise(word):
    if word == "boom":
        raise ValueError("no key for boom")
    return word


class Words(StreamletSpout):
    WORDS = ["a", "b", "a", "boom", "c", "a"]

    def initialize(self, config, context):
        self.i, self.acked, self.failed = 0, [], []

    def next_tuple(self):
        if self.i < len(self.WORDS):
            self.emit([self.WORDS[self.i]], tup_id=self.i, stream=OUTPUT_STREAM)
            self.i += 1

    def ack(self, tup_id):
        self.acked.append(tup_id)

    def fail(self, tup_id):
        self.failed.append(tup_id)


class Collect(StreamletBolt):
    outputs = []

    def initialize(self, config, context):
        self.got = []

    def process(self, tup):
        self.got.append(tuple(tup.values[0]))
        self.ack(tup)


def keyed_plan(emit="update", mode="ATLEAST_ONCE", par=2, bolt=keyed.CountByKeyBolt, extra=None):
    packed = functions.pack("test", key_or_raise)
    config = {keyed.KEY_FUNCTION: packed, keyed.EMIT: emit, **(extra or {})}
    b = TopologyBuilder("k")
    b.add_spout("words", Words, par=1)
    b.add_bolt("count", bolt, par=par, config=config,
               inputs={GlobalStreamId("words", OUTPUT_STREAM): Grouping.custom(KeyFunctionGrouping("count", packed))})
    b.add_bolt("sink", Collect, par=1, inputs={GlobalStreamId("count", OUTPUT_STREAM): Grouping.SHUFFLE})
    b.set_config({"topology.reliability.mode": mode, "topology.message.timeout.secs": 30})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)



def test_update_mode_acks_each_source_tuple_through_the_operator_and_fails_a_bad_key_alone(caplog):
    p = HostPipeline(keyed_plan(), "words")
    with caplog.at_level(logging.ERROR):
        p.pump(spout_calls=10)
    [spout], [sink] = p.users("words"), p.users("sink")
    # the trees completed through the keyed bolt's anchored emit and the sink's ack
    assert sorted(spout.acked) == [0, 1, 2, 4, 5] and spout.failed == [3]
    assert sorted(sink.got) == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("c", 1)]
    lines = [r.getMessage() for r in caplog.records if "failing its source tuple" in r.getMessage()]
    assert lines == ["streamlet 'count' (count_by_key): key_function raised ValueError: no key for boom for "
                     "element 'boom'; failing its source tuple"]
    assert sum(len(u.values) for u in p.users("count")) == 3


def test_tick_mode_holds_the_source_tuples_until_the_tick_emits_their_keys():
    p = HostPipeline(keyed_plan(emit="tick"), "words")
    p.pump(spout_calls=10)
    [spout], [sink] = p.users("words"), p.users("sink")
    assert spout.acked == [] and spout.failed == [3] and sink.got == []
    p.tick("count")
    assert sorted(spout.acked) == [0, 1, 2, 4, 5]
    assert sorted(sink.got) == [("a", 3), ("b", 1), ("c", 1)]
    p.tick("count")
    assert len(sink.got) == 3  # nothing changed since


def test_final_mode_acks_at_once_and_emits_every_key_when_the_task_closes():
    p = HostPipeline(keyed_plan(emit="final"), "words")
    p.pump(spout_calls=10)
    [spout], [sink] = p.users("words"), p.users("sink")
    assert sorted(spout.acked) == [0, 1, 2, 4, 5] and sink.got == []
    for t in p.plan.packing.tasks_of("count"):
        p.hosts[t].close()
    p.pump()
    assert sorted(sink.got) == [("a", 3), ("b", 1), ("c", 1)]


def test_reduce_fn_that_raises_fails_its_tuple_and_keeps_the_value(caplog):
    def add_unless_c(x, y):
        if y == "c":
            raise KeyError("c")
        return x + y

    extra = {keyed.KEY_FUNCTION: functions.pack("test", lambda w: "all"),
             keyed.FUNCTION: functions.pack("test", add_unless_c)}
    p = HostPipeline(keyed_plan(bolt=keyed.ReduceByKeyBolt, par=1, extra=extra), "words")
    with caplog.at_level(logging.ERROR):
        p.pump(spout_calls=10)
    [spout], [count] = p.users("words"), p.users("count")
    assert sorted(spout.failed) == [4] and count.values == {"all": "ababooma"}
    assert [r.getMessage() for r in caplog.records if "failing" in r.getMessage()] == [
        "streamlet 'count' (reduce_by_key): reduce_function raised KeyError: 'c' for element 'c'; "
        "failing its source tuple"]


def test_grouping_sends_an_element_whose_key_fails_to_the_first_task():
    g = KeyFunctionGrouping("op", functions.pack("test", key_or_raise))
    g.prepare(None, "c", "s", [9, 4, 7])
    assert g.choose_tasks(["boom"]) == [4]
    assert g.choose_tasks(["a"]) == g.choose_tasks(["a"]) and g.choose_tasks(["a"])[0] in (4, 7, 9)


# --- effectively once: the state saved at a checkpoint and restored ---

def _batch(dest, src, words):
    return encode_batch_frame(dest, src, dumps_batch([(OUTPUT_STREAM, [w]) for w in words]), count=len(words))


def _emitted(frames):
    out = []
    for f in frames:
        if frame_type(f) == MsgType.TUPLE_BATCH:
            out.extend(tuple(row[1][0]) for row in loads_batch(memoryview(f)[BODY_OFFSET:]))
    return out


def stateful_count(tmp_path, emit, extra=None):
    """The counting task of ``keyed_plan`` under effectively once, restored to a clean start and
    processing: (host, StatefulTask, storage, its task id, the spout's, the frames it sent)."""
    plan = keyed_plan(emit=emit, mode="EFFECTIVELY_ONCE", par=1, extra=extra)
    storage = LocalFsStorage(tmp_path / "ckpt")
    me = plan.packing.tasks_of("count")[0]
    src = plan.packing.tasks_of("words")[0]
    sent = []
    host = make_host(plan, me, sent.extend, HostOptions())
    task = StatefulTask(host, storage, "k", sent.extend, align_bytes=1 << 20, log=LOG)
    task.restore(1, 0)
    task.start_processing(1)
    return host, task, storage, me, src, sent


def batch_calls(monkeypatch, bolt, builder):
    """Runs ``builder`` in process with ``bolt``'s heron_process_batch counted: (the run, the
    size of each batch it was given)."""
    calls = []
    real = bolt.heron_process_batch

    def spy(self, values):
        calls.append(len(values))
        return real(self, values)

    monkeypatch.setattr(bolt, "heron_process_batch", spy)
    return run(builder, ["log-1"]), calls


@pytest.mark.parametrize("emit", ["update", "tick"])
def test_state_restored_from_a_checkpoint_continues_exactly(tmp_path, emit):
    host, task, storage, me, src, sent = stateful_count(tmp_path, emit)
    task.on_batch(_batch(me, src, ["a", "b", "a"]))
    if emit == "tick":
        host.tick()  # a and b emitted; then c changes before the checkpoint, unemitted
    task.on_batch(_batch(me, src, ["c"]))
    task.on_marker(encode_marker(me, src, 5))
    mark_saved(storage, "k", 5)
    saved = pickle.loads(storage.load("k", 5, me))
    assert saved[keyed.VALUES] == {"a": 2, "b": 1, "c": 1}
    assert saved.get(keyed.CHANGED, []) == (["c"] if emit == "tick" else [])
    task.on_batch(_batch(me, src, ["a", "z"]))  # after the checkpoint: rolled back below
    assert host.user.values == {"a": 3, "b": 1, "c": 1, "z": 1}
    task.restore(2, 5)
    task.start_processing(2)
    assert host.user.values == {"a": 2, "b": 1, "c": 1}
    # the new component took the task's metrics over: the key count reads the restored dict
    assert host.context.registered_metrics[keyed.METRIC_KEYS][0].get_value_and_reset() == 3
    host.flush()
    sent.clear()
    task.on_batch(_batch(me, src, ["a"]))
    if emit == "tick":
        host.tick()
    host.flush()
    # tick mode: c changed before the checkpoint and was not emitted, so the restored task emits it
    expected = [("a", 3), ("c", 1)] if emit == "tick" else [("a", 3)]
    assert sorted(_emitted(sent)) == expected


# --- mistakes: one error each ---

@pytest.mark.parametrize(("call", "expected"), [
    (lambda s: s.count_by_key(len, emit="sometimes"),
     "Streamlet.count_by_key() on a supplier streamlet: emit must be one of 'update', 'tick', 'final', "
     "found 'sometimes'"),
    (lambda s: s.count_by_key(len, tick_secs=2),
     "Streamlet.count_by_key() on a supplier streamlet: tick_secs is only for emit='tick', found tick_secs=2 "
     "with emit='update'"),
    (lambda s: s.reduce_by_key(len, max, emit="tick", tick_secs=0),
     "Streamlet.reduce_by_key() on a supplier streamlet: tick_secs must be a number of seconds > 0, found 0"),
    (lambda s: s.reduce_by_key(len, len),
     "Streamlet.reduce_by_key() on a supplier streamlet: reduce_fn must take 2 arguments, found len(obj, /)"),
    (lambda s: s.count_by_key("w"),
     "Streamlet.count_by_key() on a supplier streamlet: key_fn must be callable, found 'w' (str)"),
])
def test_mistakes_give_one_error(call, expected):
    s = Builder().new_source(lambda: 1)
    with pytest.raises(StreamletError) as e:
        call(s)
    assert str(e.value) == expected


def test_compiles_to_one_keyed_bolt_with_the_parents_partitions():
    b = Builder()
    b.new_source(Items(["x"])).set_num_partitions(2).count_by_key(len, emit="tick").log()
    topo = build_topology("t", Config(), b)
    comp = topo.component("countbykey-1")
    assert comp.par == 2
    assert comp.config[keyed.EMIT] == "tick" and comp.config[keyed.TICK_SECS] == "1.0"


def test_untracked_batches_are_counted_in_one_pass_and_a_bad_key_drops_only_its_element(caplog, monkeypatch):
    """Acking off, a received batch goes to count_by_key's heron_process_batch (no tuple per
    input): the counts are those of the per-tuple path, and a key function that raises drops
    only that element, with one line."""
    def key_or_raise(word):
        if word == "boom":
            raise ValueError("no key for boom")
        return word

    b = Builder()
    b.new_source(Items([*TEXT, "boom cat"])).flat_map(str.split).count_by_key(key_or_raise).log()
    with caplog.at_level(logging.ERROR):
        r, calls = batch_calls(monkeypatch, keyed.CountByKeyBolt, b)
    assert calls and sum(calls) == len(WORDS) + 2  # every word went through the batch path
    final = {}
    for w, n in pairs(r, "log-1"):
        final[w] = max(n, final.get(w, 0))
    assert final == dict(collections.Counter([*WORDS, "cat"]))
    lines = [rec.getMessage() for rec in caplog.records if "key_function raised" in rec.getMessage()]
    assert lines == ["streamlet 'countbykey-1' (count_by_key): key_function raised ValueError: no key for boom for "
                     "element 'boom'; dropped (its tuple is not tracked)"]


@pytest.mark.parametrize("emit", ["update", "tick", "final"])
def test_untracked_batches_are_reduced_in_one_pass_and_a_bad_element_drops_only_itself(caplog, monkeypatch, emit):
    """reduce_by_key's heron_process_batch (acking off): the values are those of the per-tuple
    fold, in order; a key or reduce function that raises drops only that element, one line each."""
    def key(s):
        if s == "boom":
            raise ValueError("no key for boom")
        return s[0]

    def add(a, c):
        if c == 13:
            raise ArithmeticError("13 is unlucky")
        return a + c

    items = ["a1", "b20", "boom", "a300", "b13", "b4000", "a2"]
    b = Builder()
    b.new_source(Items(items)).reduce_by_key(key, add, value_fn=lambda s: int(s[1:]), emit=emit).log()
    with caplog.at_level(logging.ERROR):
        r, calls = batch_calls(monkeypatch, keyed.ReduceByKeyBolt, b)
    assert calls and sum(calls) == len(items)  # every element went through the batch path
    got = pairs(r, "log-1")
    if emit == "update":
        assert got == [("a", 1), ("b", 20), ("a", 301), ("b", 4020), ("a", 303)]
    else:
        assert sorted(got) == [("a", 303), ("b", 4020)]
    lines = [rec.getMessage() for rec in caplog.records if " raised " in rec.getMessage()]
    assert lines == [
        "streamlet 'reducebykey-1' (reduce_by_key): key_function raised ValueError: no key for boom for element "
        "'boom'; dropped (its tuple is not tracked)",
        "streamlet 'reducebykey-1' (reduce_by_key): value_function or reduce_function raised ArithmeticError: 13 is "
        "unlucky for element 'b13'; dropped (its tuple is not tracked)"]
