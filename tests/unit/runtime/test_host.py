"""The component host (heron_py/runtime/host.py): inputs in, user calls and frames out,
with no sockets, threads or clock of its own."""

from __future__ import annotations

import dataclasses
import random

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.common.config import ConfigError, ReliabilityConfig
from heron_py.common.framing import (
    ACK_INIT,
    ACK_RECORD,
    BATCH_HEADER,
    BODY_OFFSET,
    HEADER_SIZE,
    RESULT_ACKED,
    RESULT_FAILED,
    RESULT_RECORD,
    RESULT_TIMED_OUT,
    MsgType,
    encode_batch_frame,
    frame_type,
)
from heron_py.common.serialization import ONE, dumps_batch, dumps_body, loads_batch
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import BoltHost, HostOptions, SpoutHost, make_host
from tests.fakes import ManualClock


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.n = 0
        self.limit = int(config.get("limit", 10))
        self.calls = []
        self.acked, self.failed = [], []

    def next_tuple(self):
        if self.n < self.limit:
            self.emit([self.n], tup_id=f"id{self.n}")
            self.n += 1

    def activate(self):
        self.calls.append("activate")

    def deactivate(self):
        self.calls.append("deactivate")

    def ack(self, tup_id):
        self.acked.append(tup_id)

    def fail(self, tup_id):
        self.failed.append(tup_id)

    def close(self):
        self.calls.append("close")


class BatchNumbers(Numbers):
    """Emits three tuples a call, in one call when the host binds the batch emit; takes its
    acks a list at a time."""

    heron_emit_tracked_many = None

    def initialize(self, config, context):
        super().initialize(config, context)
        self.ack_calls = []

    def next_tuple(self):
        rows = [[self.n + i] for i in range(3)]
        ids = [f"id{self.n + i}" for i in range(3)]
        self.n += 3
        if self.heron_emit_tracked_many is not None:
            self.heron_emit_tracked_many(rows, ids)
        else:
            for row, tup_id in zip(rows, ids, strict=True):
                self.emit(row, tup_id=tup_id)

    def heron_ack_many(self, tup_ids):
        self.ack_calls.append(list(tup_ids))
        self.acked.extend(tup_ids)


class RunNumbers(Numbers):
    """Emits three tuples a call as one tree under one id when the host binds the run emit."""

    heron_emit_tracked_run = None

    def next_tuple(self):
        rows = [[self.n + i] for i in range(3)]
        run = f"run{self.n // 3}"
        self.n += 3
        if self.heron_emit_tracked_run is not None:
            self.heron_emit_tracked_run(rows, run)
        else:
            for i, row in enumerate(rows):
                self.emit(row, tup_id=f"{run}.{i}")


class Double(Bolt):
    outputs = ["n"]

    def initialize(self, config, context):
        self.seen = []
        self.ticks = 0
        if config.get("tick.in.initialize"):
            # as heronpy's window bolts do: the tick rate is set inside initialize()
            config["topology.tick.tuple.freq.secs"] = 2

    def process(self, tup):
        self.seen.append((tup.component, tup.stream, tup.task, tuple(tup.values)))
        if tup.values[0] == -1:
            raise ValueError("minus one")
        self.emit([tup.values[0] * 2])

    def process_tick(self, tup):
        self.ticks += 1

    def cleanup(self):
        self.seen.append("cleanup")


class AutoDouble(Double):
    auto_ack = True
    auto_fail = True
    auto_anchor = True


class Sink(Bolt):
    outputs = []

    def process(self, tup):
        pass


def _plan(config=None, bolt=Double, spout_config=None, state=TopologyState.RUNNING, spout=None):
    b = TopologyBuilder("t")
    s = b.add_spout("numbers", spout or Numbers, par=1, config=spout_config or {})
    d = b.add_bolt("double", bolt, par=2, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("sink", Sink, par=1, inputs={d: Grouping.fields("n")})
    if config:
        b.set_config(config)
    topo = b.build()
    packing = round_robin(topo, 1)
    return PhysicalPlan(topo, packing, (StmgrLocation(0, "h", 1, 2),), state, 1)


def _task(plan, component, i=0):
    return plan.packing.tasks_of(component)[i]


def _rows(frames, kind=MsgType.TUPLE_BATCH):
    out = []
    for f in frames:
        if frame_type(f) != kind:
            continue
        dest, src, _n = BATCH_HEADER.unpack_from(f, HEADER_SIZE)
        body = memoryview(f)[BODY_OFFSET:]
        rows = loads_batch(body) if kind == MsgType.TUPLE_BATCH else list(ACK_RECORD.iter_unpack(body))
        out.append((dest, src, rows))
    return out




def test_bolt_host_calls_process_per_tuple_and_emits_frames_on_flush():
    plan = _plan()
    frames = []
    host = make_host(plan, _task(plan, "double"), frames.extend)
    assert isinstance(host, BoltHost)
    host.initialize()
    host.start()
    spout = _task(plan, "numbers")
    host.process_frame(encode_batch_frame(host.task_id, spout, dumps_batch([("default", [1]), ("default", [2])]),
                                          MsgType.TUPLE_BATCH, 2))
    assert host.user.seen == [("numbers", "default", spout, (1,)), ("numbers", "default", spout, (2,))]
    assert frames == []  # nothing goes out before a flush (or a full batch)
    assert host.has_pending
    host.flush()
    sink = _task(plan, "sink")
    assert [(d, s, [tuple(r[1]) for r in rows]) for d, s, rows in _rows(frames)] == [(sink, host.task_id, [(2,), (4,)])]
    assert host.counters.processed == 2 and host.counters.executed == {"numbers/default": 2}
    assert not host.has_pending


def test_bolt_close_runs_cleanup_and_flushes():
    plan = _plan()
    frames = []
    host = make_host(plan, _task(plan, "double"), frames.extend)
    host.initialize()
    host.process_body(_task(plan, "numbers"), dumps_batch([("default", [5])]))
    host.close()
    assert host.user.seen[-1] == "cleanup"
    assert [r[1] for _, _, rows in _rows(frames) for r in rows] == [[10]]


def test_tick_rate_is_read_after_initialize():
    plan = _plan(config={"tick.in.initialize": True})
    host = make_host(plan, _task(plan, "double"), [].extend)
    assert isinstance(host, BoltHost)
    assert host.tick_s is None
    host.initialize()
    assert host.tick_s == 2
    host.tick()
    assert host.user.ticks == 1


def test_observer_sees_received_rows_and_tap_sees_emits():
    plan = _plan()
    seen, tapped = [], []
    options = HostOptions(observer=lambda comp, src, rows: seen.append((comp, src, [tuple(r[1]) for r in rows])),
                          tap=lambda stream, values: tapped.append((stream, list(values))))
    host = make_host(plan, _task(plan, "double"), [].extend, options)
    host.initialize()
    host.process_body(_task(plan, "numbers"), dumps_batch([("default", [3])]))
    assert seen == [("numbers", _task(plan, "numbers"), [(3,)])]
    assert tapped == [("default", [6])]


def test_spout_host_activation_follows_the_plan():
    plan = _plan(state=TopologyState.PAUSED)
    host = make_host(plan, _task(plan, "numbers"), [].extend)
    assert isinstance(host, SpoutHost)
    host.initialize()
    host.start()
    assert host.user.calls == [] and not host.active
    host.set_plan(dataclasses.replace(plan, state=TopologyState.RUNNING, version=2))
    host.set_plan(dataclasses.replace(plan, state=TopologyState.PAUSED, version=1))  # older: ignored
    assert host.user.calls == ["activate"] and host.active
    host.set_plan(dataclasses.replace(plan, state=TopologyState.PAUSED, version=3))
    host.close()
    assert host.user.calls == ["activate", "deactivate", "close"]


def _acking_spout(max_pending=None, clock=None):
    cfg = {"topology.reliability.mode": "ATLEAST_ONCE", "topology.message.timeout.secs": 10}
    if max_pending:
        cfg["topology.max.spout.pending"] = max_pending
    plan = _plan(config=cfg)
    frames = []
    host = make_host(plan, _task(plan, "numbers"), frames.extend,
                     HostOptions(clock=clock or ManualClock(100.0), rng=random.Random(1)))
    assert isinstance(host, SpoutHost)
    host.initialize()
    host.start()
    return host, frames


def test_max_spout_pending_bounds_next_tuple_calls():
    host, frames = _acking_spout(max_pending=3)
    assert host.next_tuples(64) == 3
    assert host.room() == 0 and host.next_tuples(64) == 0
    host.flush()
    inits = [r for _, _, rows in _rows(frames, MsgType.ACK_BATCH) for r in rows]
    # one INIT record per root
    assert len(inits) == 3 and {r[0] for r in inits} == {ACK_INIT} and len({r[1] for r in inits}) == 3


def test_ack_results_call_ack_or_fail_once_per_root():
    host, frames = _acking_spout()
    host.next_tuples(3)
    host.flush()
    roots = [r[1] for _, _, rows in _rows(frames, MsgType.ACK_BATCH) for r in rows]
    body = b"".join([RESULT_RECORD.pack(RESULT_ACKED, roots[0]), RESULT_RECORD.pack(RESULT_FAILED, roots[1]),
                     RESULT_RECORD.pack(RESULT_TIMED_OUT, roots[2]), RESULT_RECORD.pack(RESULT_ACKED, roots[0])])
    host.on_results(encode_batch_frame(host.task_id, 0, body, MsgType.ACK_RESULT, 4))
    assert host.user.acked == ["id0"]  # the late duplicate for root 0 is ignored
    assert host.user.failed == ["id1", "id2"]  # Storm calls fail() for a time-out too
    assert (host.metrics.acked, host.metrics.failed, host.metrics.timed_out) == (1, 1, 1)


class FailOnly(Numbers):
    """A spout that keeps no state per acked id: heronpy's own ack(), which does nothing."""

    ack = Spout.ack


def test_a_spout_without_ack_still_gets_its_fails_and_counts_its_acks():
    plan = _plan(config={"topology.reliability.mode": "ATLEAST_ONCE"}, spout=FailOnly)
    frames = []
    host = make_host(plan, _task(plan, "numbers"), frames.extend,
                     HostOptions(clock=ManualClock(100.0), rng=random.Random(1)))
    host.initialize()
    host.start()
    host.next_tuples(3)
    host.flush()
    roots = [r[1] for _, _, rows in _rows(frames, MsgType.ACK_BATCH) for r in rows]
    body = b"".join([RESULT_RECORD.pack(RESULT_ACKED, roots[0]), RESULT_RECORD.pack(RESULT_FAILED, roots[1]),
                     RESULT_RECORD.pack(RESULT_ACKED, roots[2])])
    host.on_results(encode_batch_frame(host.task_id, 0, body, MsgType.ACK_RESULT, 3))
    assert host.user.failed == ["id1"] and host.user.acked == []
    assert (host.metrics.acked, host.metrics.failed) == (2, 1) and not host.reliability.pending


def _batch_spout(config):
    plan = _plan(config={"topology.reliability.mode": "ATLEAST_ONCE", **config}, spout=BatchNumbers)
    frames = []
    host = make_host(plan, _task(plan, "numbers"), frames.extend,
                     HostOptions(clock=ManualClock(100.0), rng=random.Random(1)))
    host.initialize()
    host.start()
    return host, frames


def test_a_batch_spout_emits_in_one_call_and_gets_a_frames_acks_in_one_call_fails_in_place():
    host, frames = _batch_spout({})
    assert host.user.heron_emit_tracked_many is not None  # bound: no hook, no tap
    assert host.next_tuples(2) == 6  # two next_tuple calls, three tuples each
    host.flush()
    assert sorted(r[1] for _, _, rows in _rows(frames) for r in rows) == [[n] for n in range(6)]  # 2 tasks
    roots = [r[1] for _, _, rows in _rows(frames, MsgType.ACK_BATCH) for r in rows]
    assert len(roots) == 6 and len(host.reliability.pending) == 6
    body = b"".join([RESULT_RECORD.pack(RESULT_ACKED, roots[0]), RESULT_RECORD.pack(RESULT_ACKED, roots[1]),
                     RESULT_RECORD.pack(RESULT_FAILED, roots[2]), RESULT_RECORD.pack(RESULT_ACKED, roots[3]),
                     RESULT_RECORD.pack(RESULT_ACKED, roots[1]), RESULT_RECORD.pack(RESULT_TIMED_OUT, roots[4])])
    host.on_results(encode_batch_frame(host.task_id, 0, body, MsgType.ACK_RESULT, 6))
    # the acks before a fail come first, in one call; a late duplicate (root 1 again) is dropped
    assert host.user.ack_calls == [["id0", "id1"], ["id3"]]
    assert host.user.failed == ["id2", "id4"]
    assert (host.metrics.acked, host.metrics.failed, host.metrics.timed_out) == (3, 1, 1)
    assert host.room() == (1 << 30) and len(host.reliability.pending) == 1


def test_a_run_spout_emits_a_batch_as_one_tree_counted_as_its_tuples():
    plan = _plan(config={"topology.reliability.mode": "ATLEAST_ONCE", "topology.max.spout.pending": 6},
                 spout=RunNumbers)
    frames = []
    host = make_host(plan, _task(plan, "numbers"), frames.extend,
                     HostOptions(clock=ManualClock(100.0), rng=random.Random(1)))
    host.initialize()
    host.start()
    assert host.user.heron_emit_tracked_run is not None  # bound: no hook, no tap
    # max pending 6, looked at before each call (Storm's rule): two runs of three, not a third
    assert host.next_tuples(5) == 6
    assert host.room() == 0 and len(host.reliability.pending) == 2
    host.flush()
    assert sorted(r[1] for _, _, rows in _rows(frames) for r in rows) == [[n] for n in range(6)]
    inits = [r for _, _, rows in _rows(frames, MsgType.ACK_BATCH) for r in rows]
    assert len(inits) == 2  # one init record per run
    body = RESULT_RECORD.pack(RESULT_ACKED, inits[0][1]) + RESULT_RECORD.pack(RESULT_FAILED, inits[1][1])
    host.on_results(encode_batch_frame(host.task_id, 0, body, MsgType.ACK_RESULT, 2))
    assert host.user.acked == ["run0"] and host.user.failed == ["run1"]
    assert (host.metrics.acked, host.metrics.failed) == (3, 3) and host.room() == 6
    assert host.next_tuples(5) == 6 and host.room() == 0  # the room the results freed: two runs again


def test_a_spout_seen_emitting_several_tuples_a_call_gets_max_pending_looked_at_before_each_call():
    """A hook sees each emit, so no batch emit is bound: the first call shows three tuples a
    call, and from then on the room is looked at before each call (Storm's rule)."""
    host, _ = _batch_spout({"topology.auto.task.hooks": "tests.unit.runtime.test_hooks.CountingHook",
                            "topology.max.spout.pending": 6})
    assert host.user.heron_emit_tracked_many is None
    assert host.next_tuples(1) == 3 and host.room() == 3
    assert host.next_tuples(5) == 3 and host.room() == 0  # one call fit, not five


def test_a_hook_gets_each_emit_and_ack_of_a_batch_spout():
    host, frames = _batch_spout({"topology.auto.task.hooks": "tests.unit.runtime.test_hooks.CountingHook"})
    assert host.user.heron_emit_tracked_many is None  # not bound: the hook sees each emit
    host.next_tuples(1)
    host.flush()
    roots = [r[1] for _, _, rows in _rows(frames, MsgType.ACK_BATCH) for r in rows]
    body = b"".join(RESULT_RECORD.pack(RESULT_ACKED, r) for r in roots)
    host.on_results(encode_batch_frame(host.task_id, 0, body, MsgType.ACK_RESULT, 3))
    assert host.user.ack_calls == [] and host.user.acked == ["id0", "id1", "id2"]  # ack() per id
    assert host.hooks is not None


def test_spout_expires_roots_by_its_own_clock():
    clock = ManualClock(100.0)
    host, _ = _acking_spout(clock=clock)
    host.next_tuples(2)
    clock.now += 10 * 1.5 + 0.5
    host.expire()
    assert host.user.failed == []
    clock.now += 1.0
    host.expire()
    assert host.user.failed == ["id0", "id1"]


def test_at_most_once_options_override_the_topology_mode():
    cfg = {"topology.reliability.mode": "ATLEAST_ONCE", "topology.max.spout.pending": 1}
    plan = _plan(config=cfg)
    frames = []
    host = make_host(plan, _task(plan, "numbers"), frames.extend, HostOptions(reliability=ReliabilityConfig()))
    host.initialize()
    host.start()
    assert host.reliability is None
    assert host.next_tuples(5) == 5  # no pending bound without tracking
    host.flush()
    assert _rows(frames, MsgType.ACK_BATCH) == []


def test_auto_ack_and_auto_fail_around_process():
    plan = _plan(bolt=AutoDouble)
    host = make_host(plan, _task(plan, "double"), [].extend)
    host.initialize()
    host.process_body(_task(plan, "numbers"), dumps_batch([("default", [1]), ("default", [-1]), ("default", [2])]))
    assert (host.metrics.acked, host.metrics.failed) == (2, 1)


def test_process_exception_propagates_without_auto_fail():
    plan = _plan()
    host = make_host(plan, _task(plan, "double"), [].extend)
    host.initialize()
    with pytest.raises(ValueError, match="minus one"):
        host.process_body(_task(plan, "numbers"), dumps_batch([("default", [-1])]))


def test_next_tuples_stops_when_its_time_budget_is_spent():
    # a spout that sleeps in next_tuple (ArrayLooper(sleep=1)) must not hold 64 sleeps of
    # emits back: the budget ends the round, so the runner flushes after each slow call
    clock = ManualClock(100.0)
    plan = _plan(spout_config={"limit": 100})
    host = make_host(plan, _task(plan, "numbers"), [].extend, HostOptions(clock=clock))
    host.initialize()
    host.start()
    slow = host.user.next_tuple

    def sleepy():
        slow()
        clock.now += 0.4  # each call "sleeps" 0.4 s

    host.user.next_tuple = sleepy
    assert host.next_tuples(64, budget_s=1.0) == 3  # 0.4, 0.8, 1.2 s: the third passes the budget
    assert host.next_tuples(64) == 64  # no budget: the whole round


class AckingDouble(Double):
    def process(self, tup):
        super().process(tup)
        self.ack(tup)


@pytest.mark.parametrize(("rate", "samples"), [(None, 1), (0.25, 3), (1, 10), (5, 10)])
def test_a_bolt_times_the_process_latency_of_one_ack_in_so_many(rate, samples):
    """topology.stats.sample.rate (Storm's key, default 0.05: 1 in 20): the acks timed are the
    first and every 1/rate-th after it; the count of acks stays exact, and the reported mean is
    over the acks timed."""
    conf = {"topology.reliability.mode": "ATLEAST_ONCE"}
    if rate is not None:
        conf["topology.stats.sample.rate"] = rate
    plan = _plan(config=conf, bolt=AckingDouble)
    host = make_host(plan, _task(plan, "double"), [].extend)
    host.initialize()
    rows = [("default", [i], ((1, 100 + i, 5),)) for i in range(10)]
    host.process_body(_task(plan, "numbers"), dumps_batch(rows))
    assert (host.metrics.acked, host.metrics.process_samples) == (10, samples)
    assert host.metrics.process_ms_total >= 0.0


def test_a_sample_rate_that_is_not_a_positive_number_is_refused():
    plan = _plan(config={"topology.stats.sample.rate": 0})
    with pytest.raises(ConfigError) as e:
        make_host(plan, _task(plan, "double"), [].extend)
    assert str(e.value) == "config topology.stats.sample.rate: expected a number > 0, found '0'"


def test_a_run_of_bare_values_reaches_process_as_one_value_tuples():
    plan = _plan()
    host = make_host(plan, _task(plan, "double"), [].extend)
    host.initialize()
    spout = _task(plan, "numbers")
    host.process_body(spout, dumps_body([("default", None, ONE, [3, 4]), ("default", [5])], None, None))
    assert host.user.seen == [("numbers", "default", spout, (3,)), ("numbers", "default", spout, (4,)),
                              ("numbers", "default", spout, (5,))]
    assert host.counters.processed == 3


class BatchDouble(Double):
    """A batch bolt: each batch's inputs as given, outputs doubled (``heron_batch_one``: bare)."""

    heron_batch_one = False

    def heron_process_batch(self, values):
        self.seen.append(list(values))
        if self.heron_batch_one:
            return [v * 2 for v in values], 0
        return [[v[0] * 2] for v in values], 0


class BareBatchDouble(BatchDouble):
    heron_batch_one = True


@pytest.mark.parametrize("bolt", [BatchDouble, BareBatchDouble])
def test_a_batch_bolt_gets_its_inputs_in_its_form_from_any_body(bolt):
    """Bare values and value lists, from a run of either kind, rows and hot values: a
    ``heron_batch_one`` bolt gets each input's value bare, another its values; the outputs reach
    the next task as one-value tuples either way."""
    plan = _plan(bolt=bolt)
    frames = []
    host = make_host(plan, _task(plan, "double"), frames.extend)
    host.initialize()
    spout = _task(plan, "numbers")
    bodies = [dumps_body([("default", None, ONE, [1, 2])], None, None),
              dumps_body([("default", None, None, [[3], [4]])], None, None),
              dumps_body([("default", None, ONE, [5]), ("default", [6])], [[7]], None)]
    for body in bodies:
        host.process_body(spout, body)
    one = bolt.heron_batch_one
    if one:
        assert host.user.seen == [[1, 2], [3, 4], [5, 6, 7]]
    else:  # a bare run's values as one-value tuples, the others as they came
        assert host.user.seen == [[(1,), (2,)], [[3], [4]], [(5,), [6], [7]]]
    host.flush()
    assert sorted(r[1] for _d, _s, rows in _rows(frames) for r in rows) == [(2 * v,) if one else [2 * v]
                                                                           for v in range(1, 8)]
    assert host.counters.processed == 7
