"""Spout-side at-least-once bookkeeping (heron_py/runtime/reliability.py) with a fake clock, then the
same promises end to end through heron_py.testing.Harness."""

import collections
import logging
import random
from collections import Counter

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.stream import Grouping, Stream
from heron_py.api.topology import TopologyBuilder
from heron_py.common.config import Mode, ReliabilityConfig
from heron_py.common.framing import RESULT_ACKED, RESULT_FAILED, RESULT_TIMED_OUT
from heron_py.runtime.reliability import LOCAL_TIMEOUT_FACTOR, LOCAL_TIMEOUT_SLACK_S, Reliability, TaskMetrics
from heron_py.runtime.tracked import GOLDEN, Edges
from heron_py.testing import EOF, Harness, TestSource
from tests.fakes import ManualClock


def make(timeout_s=10.0, max_pending=None, seed=1):
    clock = ManualClock(1000.0)
    rel = Reliability(timeout_s, max_pending, clock, rng=random.Random(seed))
    return rel, clock


def test_local_timeout_constants():
    # the stream manager times a root out between T and 1.5 T; the task a little after
    assert (LOCAL_TIMEOUT_FACTOR, LOCAL_TIMEOUT_SLACK_S) == (1.5, 1.0)


def test_new_root_is_random_64_bit_and_never_zero():
    rel, _ = make()
    roots = [rel.new_root() for _ in range(1000)]
    assert all(0 < r < 1 << 64 for r in roots)
    assert len(set(roots)) == 1000
    assert max(roots) >= 1 << 60  # uses the whole 64 bits, not a small range

    class ZeroFirst(random.Random):  # a seed whose first draw is 0 (splitmix64 gives 0 from one state)
        def getrandbits(self, k):  # the 64-bit seed only; the routers' draws stay random
            return (1 << 64) - GOLDEN if k == 64 else super().getrandbits(k)

    assert Reliability(1.0, None, ManualClock(1000.0), rng=ZeroFirst()).new_root() == Edges(0).draw() != 0


def test_new_root_is_deterministic_for_a_seeded_rng():
    a, _ = make(seed=5)
    b, _ = make(seed=5)
    c, _ = make(seed=6)
    ra = [a.new_root() for _ in range(5)]
    assert ra == [b.new_root() for _ in range(5)]
    assert ra != [c.new_root() for _ in range(5)]


def test_emitted_with_xor_zero_acks_at_once():
    rel, _ = make()
    rel.emitted(rel.new_root(), "m1", 0)
    rel.emitted(rel.new_root(), "m2", 0)
    assert rel.pending == {}
    assert rel.metrics.acked == 2
    assert len(rel.metrics.latencies_ms) == 0
    assert rel.take_immediate() == ["m1", "m2"]
    assert rel.take_immediate() == []
    assert rel.metrics.acked == 2


def test_emitted_with_nonzero_xor_is_pending_until_resolved():
    rel, clock = make()
    root = rel.new_root()
    rel.emitted(root, {"id": 1}, 0xABC)
    assert rel.take_immediate() == []
    assert list(rel.pending) == [root]
    assert rel.pending == collections.OrderedDict([(root, ({"id": 1}, 1000.0))])
    clock.t = 1000.25
    assert rel.resolve(root, RESULT_ACKED) == {"id": 1}
    assert rel.pending == {}
    assert rel.metrics.acked == 1
    assert list(rel.metrics.latencies_ms) == [pytest.approx(250.0)]


def test_resolve_returns_the_message_id_exactly_once():
    rel, _ = make()
    rel.emitted(11, "m", 5)
    assert rel.resolve(11, RESULT_ACKED) == "m"
    for outcome in (RESULT_ACKED, RESULT_FAILED, RESULT_TIMED_OUT):
        assert rel.resolve(11, outcome) is Reliability.UNKNOWN
    assert (rel.metrics.acked, rel.metrics.failed, rel.metrics.timed_out) == (1, 0, 0)
    assert rel.resolve(12345, RESULT_FAILED) is Reliability.UNKNOWN  # never emitted
    assert rel.metrics.failed == 0


def test_a_message_id_of_none_is_not_unknown():
    rel, _ = make()
    rel.emitted(3, None, 1)
    assert rel.resolve(3, RESULT_FAILED) is None
    assert rel.resolve(3, RESULT_FAILED) is Reliability.UNKNOWN


def test_outcomes_are_counted_and_only_acks_record_latency():
    rel, clock = make()
    for root in range(1, 7):
        rel.emitted(root, f"m{root}", root)
    clock.t += 0.002
    assert rel.resolve(1, RESULT_ACKED) == "m1"
    clock.t += 0.003
    assert rel.resolve(2, RESULT_ACKED) == "m2"
    assert rel.resolve(3, RESULT_FAILED) == "m3"
    assert rel.resolve(4, RESULT_FAILED) == "m4"
    assert rel.resolve(5, RESULT_TIMED_OUT) == "m5"
    m = rel.metrics
    assert (m.acked, m.failed, m.timed_out) == (2, 2, 1)
    assert list(m.latencies_ms) == [pytest.approx(2.0), pytest.approx(5.0)]
    assert list(rel.pending) == [6]


def test_resolve_acked_run_resolves_acks_up_to_the_first_other_outcome():
    rel, clock = make()
    for root in range(1, 6):
        rel.emitted(root, f"m{root}", root)
    clock.t += 0.004
    records = [(RESULT_ACKED, 1), (RESULT_ACKED, 9), (RESULT_ACKED, 2), (RESULT_FAILED, 3), (RESULT_ACKED, 4),
               (RESULT_ACKED, 1)]
    acked = []
    assert rel.resolve_acked_run(records, 0, acked) == 3  # stops at the fail; root 9 is unknown
    assert acked == ["m1", "m2"]
    assert rel.resolve(3, RESULT_FAILED) == "m3"
    acked = []
    assert rel.resolve_acked_run(records, 4, acked) == 6  # the late duplicate of root 1 is dropped
    assert acked == ["m4"]
    m = rel.metrics
    assert (m.acked, m.failed) == (3, 1)
    assert list(m.latencies_ms) == [pytest.approx(4.0)] * 3 and rel.last_latency_ms == pytest.approx(4.0)
    assert list(rel.pending) == [5]
    assert rel.resolve_acked_run(records, 6, acked) == 6 and acked == ["m4"]


def test_emitted_many_is_emitted_per_root():
    one, _ = make()
    many, _ = make()
    roots, ids, xors = [1, 2, 3], ["a", "b", "c"], [7, 0, 9]
    for r, t, x in zip(roots, ids, xors, strict=True):
        one.emitted(r, t, x)
    many.emitted_many(roots, ids, xors)
    assert many.pending == one.pending and list(many.pending) == [1, 3]
    assert many.take_immediate() == one.take_immediate() == ["b"]  # XOR 0: no copy sent, acked at once
    assert many.metrics.acked == one.metrics.acked == 1


def test_a_run_is_one_root_counted_as_its_tuples_in_room_and_metrics():
    """``emitted_run``: one pending root and one outcome for n tuples; max pending and the
    counts see n, by every way a root resolves (resolve, a run of acks, the local timeout)."""
    rel, clock = make(max_pending=100)
    rel.emitted_run(1, "run1", 7, 10)
    rel.emitted_run(2, "run2", 7, 20)
    rel.emitted(3, "one", 7)
    rel.emitted_run(4, "run4", 7, 30)
    rel.emitted_run(5, "run5", 0, 5)  # no copy sent: acked at once, takes no room
    assert list(rel.pending) == [1, 2, 3, 4] and rel.room() == 100 - 61
    assert rel.take_immediate() == ["run5"] and rel.metrics.acked == 5
    clock.t += 0.003
    acked = []
    assert rel.resolve_acked_run([(RESULT_ACKED, 1), (RESULT_ACKED, 3), (RESULT_FAILED, 2)], 0, acked) == 2
    assert acked == ["run1", "one"] and rel.metrics.acked == 5 + 10 + 1 and rel.room() == 100 - 50
    assert rel.resolve(2, RESULT_FAILED) == "run2" and rel.metrics.failed == 20 and rel.room() == 100 - 30
    assert rel.resolve(2, RESULT_FAILED) is Reliability.UNKNOWN and rel.metrics.failed == 20
    clock.t += 10.0 * LOCAL_TIMEOUT_FACTOR + LOCAL_TIMEOUT_SLACK_S
    assert rel.expire() == ["run4"] and rel.metrics.timed_out == 30 and rel.room() == 100
    rel.emitted_run(6, "run6", 7, 1)  # a run of one is a plain root
    assert rel.room() == 99 and rel.resolve(6, RESULT_TIMED_OUT) == "run6" and rel.metrics.timed_out == 31
    rel.emitted_run(7, "run7", 7, 2)
    rel.emitted_run(8, "run8", 0, 3)
    assert rel.room() == 98 and rel.metrics.acked == 16 + 3
    assert rel.resolve(7, RESULT_ACKED) == "run7" and rel.metrics.acked == 21 and rel.room() == 100


def test_metrics_are_shared_when_given():
    metrics = TaskMetrics()
    rel = Reliability(5.0, None, ManualClock(1000.0), metrics=metrics, rng=random.Random(0))
    assert rel.metrics is metrics
    rel.emitted(1, "a", 0)
    assert metrics.acked == 1


def test_expire_fails_old_roots_in_emit_order_and_keeps_younger_ones():
    rel, clock = make(timeout_s=10.0)  # local timeout: 10 * 1.5 + 1 = 16 s
    emitted_at = {}
    for i, root in enumerate([50, 10, 40, 30, 20]):  # emit order is not root order
        clock.t = 1000.0 + i * 2.0
        emitted_at[root] = clock.t
        rel.emitted(root, f"m{root}", 1)
    clock.t = 1000.0 + 15.9
    assert rel.expire() == []
    assert len(rel.pending) == 5
    clock.t = 1000.0 + 2.0 + 16.5  # the first two are older than 16 s; the third is 14.5 s old
    assert rel.expire() == ["m50", "m10"]
    assert list(rel.pending) == [40, 30, 20]
    assert rel.metrics.timed_out == 2 and rel.metrics.failed == 0
    assert rel.resolve(50, RESULT_ACKED) is Reliability.UNKNOWN  # an expired root resolves no more
    assert rel.expire() == []
    clock.t = 1000.0 + 100.0
    assert rel.expire() == ["m40", "m30", "m20"]
    assert rel.pending == {} and rel.metrics.timed_out == 5
    assert rel.metrics.acked == 0


def test_expire_skips_roots_already_resolved():
    rel, clock = make(timeout_s=1.0)  # local timeout 2.5 s
    rel.emitted(1, "a", 1)
    rel.emitted(2, "b", 1)
    rel.emitted(3, "c", 1)
    assert rel.resolve(2, RESULT_ACKED) == "b"
    clock.t += 3.0
    assert rel.expire() == ["a", "c"]
    assert (rel.metrics.acked, rel.metrics.timed_out) == (1, 2)


def test_expire_stops_at_the_first_young_root():
    # emit order is time order, so the scan ends at the first root that is young enough
    rel, clock = make(timeout_s=2.0)  # local timeout 4 s
    rel.emitted(1, "old", 1)
    clock.t += 3.0
    rel.emitted(2, "young", 1)
    clock.t += 1.5  # "old" 4.5 s, "young" 1.5 s
    assert rel.expire() == ["old"]
    assert list(rel.pending) == [2]


def test_room_without_max_pending_is_unbounded():
    rel, _ = make(max_pending=None)
    for root in range(1, 1001):
        rel.emitted(root, root, 1)
    assert rel.room() >= 1 << 20


def test_room_with_max_pending():
    rel, _ = make(max_pending=3)
    assert rel.room() == 3
    rel.emitted(1, "a", 1)
    rel.emitted(2, "b", 1)
    assert rel.room() == 1
    rel.emitted(3, "c", 0)  # acked at once: takes no room
    assert rel.room() == 1
    rel.emitted(4, "d", 1)
    assert rel.room() == 0
    rel.resolve(1, RESULT_FAILED)
    assert rel.room() == 1
    assert rel.resolve(1, RESULT_FAILED) is Reliability.UNKNOWN
    assert rel.room() == 1


def test_from_config_is_none_at_most_once():
    clock = ManualClock(1000.0)
    assert Reliability.from_config(ReliabilityConfig(), clock) is None
    assert Reliability.from_config(ReliabilityConfig.from_config({}), clock) is None
    assert Reliability.from_config(ReliabilityConfig(Mode.ATMOST_ONCE, 5.0, 10), clock) is None


def test_from_config_at_least_once():
    clock = ManualClock(1000.0)
    metrics = TaskMetrics()
    conf = ReliabilityConfig.from_config({"topology.reliability.mode": "ATLEAST_ONCE",
                                          "topology.message.timeout.secs": "7",
                                          "topology.max.spout.pending": "2"})
    rel = Reliability.from_config(conf, clock, metrics)
    assert isinstance(rel, Reliability)
    assert (rel.timeout_s, rel.max_pending, rel.clock, rel.metrics) == (7.0, 2, clock, metrics)
    assert rel.room() == 2
    root = rel.new_root()
    assert root != 0
    rel.emitted(root, "x", 9)
    clock.t += 7 * 1.5 + 1 + 0.01
    assert rel.expire() == ["x"]
    storm = Reliability.from_config(ReliabilityConfig.from_config({"topology.acking": "true"}), clock)
    assert isinstance(storm, Reliability) and storm.max_pending is None and storm.timeout_s == 30.0


def test_percentile_and_log_if_changed(caplog):
    m = TaskMetrics()
    assert m.percentile(0.5) is None
    m.latencies_ms.extend([5.0, 1.0, 3.0, 2.0, 4.0])
    assert (m.percentile(0.0), m.percentile(0.5), m.percentile(0.99), m.percentile(1.0)) == (1.0, 3.0, 5.0, 5.0)
    log = logging.getLogger("test.reliability")
    rel, _ = make()
    rel.emitted(1, "a", 1)
    with caplog.at_level(logging.INFO, logger="test.reliability"):
        m.acked = 2
        m.log_if_changed(log, rel)
        m.log_if_changed(log, rel)  # unchanged: not logged again
        m.failed = 1
        m.log_if_changed(log, None)
    msgs = [r.getMessage() for r in caplog.records]
    assert msgs == ["metrics: acked=2 failed=0 timed_out=0 pending=1 complete_latency_ms p50=3.0 p99=5.0",
                    "metrics: acked=2 failed=1 timed_out=0"]


def test_the_log_line_rounds_to_two_decimals_says_none_without_latencies_and_reads_the_99th(caplog):
    log = logging.getLogger("test.reliability")
    rel, _ = make()
    m = TaskMetrics()
    with caplog.at_level(logging.INFO, logger="test.reliability"):
        m.acked = 1
        m.log_if_changed(log, rel)  # no latency yet
        m.latencies_ms.extend(i + 0.1234 for i in range(200))  # the 99th: index 198, not the last
        m.acked = 2
        m.log_if_changed(log, rel)
    assert [r.getMessage() for r in caplog.records] == [
        "metrics: acked=1 failed=0 timed_out=0 pending=0 complete_latency_ms p50=None p99=None",
        "metrics: acked=2 failed=0 timed_out=0 pending=0 complete_latency_ms p50=100.12 p99=198.12"]


def test_defaults_a_batch_s_lengths_and_the_expired_latency():
    """The hooks' last latency starts at 0 and an expired root's is its age; from_config passes
    the metrics and the sample rate on (1: every root by default); emitted_many refuses lists of
    different lengths and counts each immediate ack."""
    rel, clock = make(timeout_s=10.0)
    assert rel.last_latency_ms == 0.0
    metrics = TaskMetrics()
    conf = ReliabilityConfig.from_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    one = Reliability.from_config(conf, clock, metrics, sample_every=3)
    assert one is not None and one.metrics is metrics and one.sample_every == 3
    default = Reliability.from_config(conf, clock)
    assert default is not None and default.sample_every == 1
    with pytest.raises(ValueError) as e:
        rel.emitted_many([1, 2], ["a"], [1, 1])
    assert str(e.value) == "emitted_many: 2 roots, 1 message ids and 2 XORs; one of each per tuple"
    assert rel.pending == {}  # nothing recorded
    rel.emitted_many([1, 2, 3], ["a", "b", "c"], [0, 0, 5])
    assert rel.metrics.acked == 2
    clock.t += 10.0 * LOCAL_TIMEOUT_FACTOR + LOCAL_TIMEOUT_SLACK_S  # exactly the local timeout: expired
    assert rel.expire() == ["c"]
    assert rel.last_latency_ms == pytest.approx(16_000.0, abs=1e-6)


def test_single_resolves_sample_one_acked_root_in_every():
    clock = ManualClock(1000.0)
    rel = Reliability(30.0, None, clock, rng=random.Random(3), sample_every=2)
    for root in (1, 2, 3):
        rel.emitted(root, f"m{root}", 0x1)
    for root in (1, 2, 3):
        clock.t += 1.0
        rel.resolve(root, RESULT_ACKED)
    assert list(rel.metrics.latencies_ms) == [pytest.approx(1_000.0), pytest.approx(3_000.0)]  # the 1st, the 3rd


def test_latencies_are_bounded():
    rel, clock = make()
    for root in range(1, 10_010):
        rel.emitted(root, root, 1)
        clock.t += 0.001
        rel.resolve(root, RESULT_ACKED)
    assert len(rel.metrics.latencies_ms) == 10_000
    assert rel.metrics.acked == 10_009


# --- the same promises end to end through heron_py.testing.Harness: the spout's ack or fail
# once per message id, max pending, timeouts from the clock. (The tests above check
# Reliability's own rules: root ids, the local timeout's constants, metrics; they stay as they are.)


class Items(TestSource):
    outputs = ["item"]


class HoldUntilTick(Bolt):
    """Acks what it got at its next tick; the first tuple "late" waits for a second tick."""

    outputs = []

    def initialize(self, config, context):
        self.held, self.late, self.seen_late = [], [], False

    def process(self, tup):
        if tup.values[0] == "late" and not self.seen_late:
            self.seen_late = True
            self.late.append(tup)
        else:
            self.held.append(tup)

    def process_tick(self, tup):
        for t in self.held:
            self.ack(t)
        self.held, self.late = self.late, []


def _held(items, *, pending=None, timeout=30, tick=10):
    b = TopologyBuilder("rel")
    s = b.add_spout("items", Items, par=1, config=TestSource.config(items))
    b.add_bolt("hold", HoldUntilTick, par=1, inputs={s: Grouping.SHUFFLE},
               config={"topology.tick.tuple.freq.secs": tick})
    conf = {"topology.reliability.mode": "ATLEAST_ONCE", "topology.message.timeout.secs": str(timeout)}
    if pending is not None:
        conf["topology.max.spout.pending"] = str(pending)
    b.set_config(conf)
    return b


def test_harness_max_pending_bounds_the_trees_in_flight():
    h = Harness(_held(["a", "b", "c", "d", "e", EOF], pending=2))
    r = h.run()
    assert sorted(r.pending) == [0, 1] and r.acked == Counter()  # room for two only
    h.advance(10)  # the tick acks them; the spout fills its room again
    assert r.acked == Counter({0: 1, 1: 1}) and sorted(r.pending) == [2, 3]
    r = h.complete()
    assert r.acked == Counter(dict.fromkeys(range(5), 1)) and r.failed == Counter() and h.now == 1_000_030.0


def test_harness_a_late_ack_after_the_timeout_is_ignored_and_the_replay_acked():
    # "late" is acked at the second tick (t = 20): after its 15 s timeout, so fail() is called
    # once at t = 15 and the replay (sent at once) is acked at t = 20; the late ack calls nothing
    h = Harness(_held(["x", "late", EOF], timeout=15))
    r = h.run()
    h.advance(14.999)
    assert r.acked == Counter({0: 1}) and r.failed == Counter() and r.pending == [1]
    h.advance(0.001)
    assert r.failed == Counter({1: 1}) and r.pending == [1]  # failed, emitted again, in flight
    h.advance(5)
    assert r.acked == Counter({0: 1, 1: 1}) and r.failed == Counter({1: 1}) and r.pending == []
    assert [(o.msg_id, o.kind) for o in r.outcomes] == [(0, "ack"), (1, "fail"), (1, "ack")]


class TwoStreams(TestSource):
    outputs = ["item", Stream(["note"], name="notes")]


def test_harness_a_tree_with_no_consumer_is_acked_at_once():
    # the only bolt reads the "notes" stream: a tuple on the default stream has no consumer, so
    # its tree is complete at the emit and the spout's ack comes with no time passing
    b = TopologyBuilder("nobody")
    s = b.add_spout("items", TwoStreams, par=1, config=TestSource.config(["a", "b", EOF]))
    b.add_bolt("hold", HoldUntilTick, par=1, inputs={s["notes"]: Grouping.SHUFFLE})
    b.set_config({"topology.reliability.mode": "ATLEAST_ONCE"})
    r = Harness(b).run()
    assert r.acked == Counter({0: 1, 1: 1}) and r.pending == [] and r.failed == Counter()


def test_the_complete_latency_is_sampled_as_storm_samples_it_and_every_ack_counted():
    """1 acked root in ``sample_every`` (topology.stats.sample.rate) is timed into the metrics,
    the first included, over runs of a result frame and single resolves alike; every one is
    counted and handed back."""
    clock = ManualClock(1000.0)
    rel = Reliability(30.0, None, clock, rng=random.Random(3), sample_every=3)
    roots = [rel.new_root() for _ in range(8)]
    for i, r in enumerate(roots):
        clock.t = 1000.0 + i
        rel.emitted(r, f"m{i}", 0x1)
    clock.t = 1010.0
    acked: list[str] = []
    assert rel.resolve_acked_run([(RESULT_ACKED, r) for r in roots[:7]], 0, acked) == 7
    assert acked == [f"m{i}" for i in range(7)] and rel.metrics.acked == 7
    assert list(rel.metrics.latencies_ms) == [pytest.approx(10_000.0), pytest.approx(7_000.0),
                                              pytest.approx(4_000.0)]  # roots 0, 3 and 6
    assert rel.resolve(roots[7], RESULT_ACKED) == "m7"  # the 8th ack: not sampled, its own latency kept
    assert rel.last_latency_ms == pytest.approx(3_000.0) and len(rel.metrics.latencies_ms) == 3
    assert rel.metrics.acked == 8


def test_runs_are_sampled_by_root_not_by_the_tuples_they_count():
    """A run of 20 tuples is one root: with 1 in 4 sampled, every 4th acked root is timed
    whatever the runs' sizes (counting tuples would step over the sample points: after one
    single ack, 1, 21, 41, ... are never a multiple of 4)."""
    clock = ManualClock(1000.0)
    rel = Reliability(30.0, None, clock, rng=random.Random(3), sample_every=4)
    rel.emitted(99, "single", 0x1)
    for i in range(8):
        rel.emitted_run(i + 1, f"run{i}", 0x1, 20)
    clock.t = 1001.0
    assert rel.resolve(99, RESULT_ACKED) == "single"  # root 1 of 9: sampled
    acked: list[str] = []
    rel.resolve_acked_run([(RESULT_ACKED, r) for r in range(1, 9)], 0, acked)
    assert acked == [f"run{i}" for i in range(8)] and rel.metrics.acked == 1 + 8 * 20
    assert len(rel.metrics.latencies_ms) == 3  # roots 1, 5 and 9 of the 9 acked
