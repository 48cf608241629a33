"""Dhalion's detectors and diagnosers (heron_py/elastic/diagnosis.py): on the traces, in the
master's metrics API's shape, one per scenario; then each threshold on both sides."""

from __future__ import annotations

from heron_py.elastic.diagnosis import (
    Diagnosis,
    Kind,
    SymptomKind,
    Thresholds,
    detect_backpressure,
    detect_pending,
    detect_skew,
    detect_slow,
    diagnose,
)
from heron_py.elastic.observations import ContainerWindow, TopologyObservation

from .windows import chain, container, observation, spout_task, task, trace_observation

TH = Thresholds()


def test_trace_under_provisioned_with_backpressure() -> None:
    report = diagnose(trace_observation("under_provisioned_backpressure.json"), TH)
    assert [(s.kind, s.component, s.task, s.container, s.causes) for s in report.symptoms] == [
        (SymptomKind.BACKPRESSURE, None, None, 1, ()), (SymptomKind.BACKPRESSURE, None, None, 2, ("count",)),
        (SymptomKind.PENDING, "count", 4, 2, ()), (SymptomKind.PENDING, "count", 5, 2, ())]
    assert report.diagnoses == (Diagnosis(
        Kind.UNDER_PROVISIONED, "count",
        "count is under-provisioned: its tasks were busy 99%, 99% of the window; stream manager 2 was in backpressure "
        "61% of the 30 s window (threshold 10%); behind it: count 61%"),)
    assert report.symptoms[0].line == "stream manager 1 was in backpressure 60% of the 30 s window (threshold 10%)"
    assert report.symptoms[3].line == "task 5 of count has 61 batches of input pending (over 32)"


def test_trace_over_provisioned_idle() -> None:
    report = diagnose(trace_observation("over_provisioned_idle.json"), TH)
    assert report.symptoms == ()
    assert report.diagnoses == (
        Diagnosis(Kind.OVER_PROVISIONED, "split",
                  "split is over-provisioned: its 4 tasks were busy 5%, 5%, 5%, 5% of the 30 s window (all below 30%), "
                  "without backpressure"),
        Diagnosis(Kind.OVER_PROVISIONED, "count",
                  "count is over-provisioned: its 8 tasks were busy 13%, 14%, 12%, 14%, 13%, 15%, 12%, 14% of the "
                  "30 s window (all below 30%), without backpressure"))


def test_trace_one_slow_task() -> None:
    report = diagnose(trace_observation("slow_task.json"), TH)
    assert [s.kind for s in report.symptoms] == [SymptomKind.BACKPRESSURE] * 3 + [SymptomKind.PENDING,
                                                                                  SymptomKind.SLOW_TASK]
    assert report.diagnoses == (Diagnosis(
        Kind.SLOW_INSTANCE, "count",
        "task 9 of count is slow: 2,013 records/s of useful time against its peers' median 6,057 (below 50%) on "
        "similar input (60,000 records against 60,000); stream manager 3 was in backpressure 54% of the 30 s window "
        "(threshold 10%); behind it: count 54%: restart container 3", 9, 3),)


def test_trace_skew() -> None:
    report = diagnose(trace_observation("skew.json"), TH)
    assert [s.kind for s in report.symptoms] == [SymptomKind.BACKPRESSURE] * 2 + [SymptomKind.PENDING,
                                                                                  SymptomKind.SKEW]
    # the hot task is the bottleneck, and a skewed bottleneck is not under-provisioned
    assert report.diagnoses == (Diagnosis(
        Kind.DATA_SKEW, "count",
        "task 4 of count received 50,400 records in the 30 s window, 7.0 times its peers' median 7,150 (2 times at "
        "most): more tasks do not spread a hot key", 4, 1),)
    assert report.of(Kind.UNDER_PROVISIONED) == ()
    assert report.has(Kind.DATA_SKEW, "count") and not report.has(Kind.DATA_SKEW, "split")


COMPS = chain(("src", 1), ("bolt", 3))


def bp(ms: float, **causes: float) -> TopologyObservation:
    tasks = [spout_task("src", 1, 3000, 3000)] + [task("bolt", t, 1000, 20_000, source="src") for t in (2, 3, 4)]
    return observation(COMPS, tasks, [container(1, ms, **causes)])


def test_backpressure_is_a_symptom_above_its_threshold_and_names_the_causes_above_it() -> None:
    assert detect_backpressure(bp(3000, bolt=3000), TH) == []
    (s,) = detect_backpressure(bp(3001, bolt=3000, src=3001), TH)
    assert (s.kind, s.container, s.causes) == (SymptomKind.BACKPRESSURE, 1, ("src",))
    (s,) = detect_backpressure(bp(3001, bolt=3001, **{"stmgr 2": 3001}), TH)
    assert s.causes == ("bolt",)  # a peer is not a component
    assert s.line == ("stream manager 1 was in backpressure 10% of the 30 s window (threshold 10%); behind it: "
                      "bolt 10%")
    assert diagnose(bp(3001, bolt=3001), TH).of(Kind.UNDER_PROVISIONED)[0].component == "bolt"
    assert diagnose(bp(3001, bolt=3000), TH).diagnoses == ()  # no cause named, no queue: a symptom only


def queues(*depths: float, src_queue: float = 0) -> TopologyObservation:
    tasks = [task("src", 1, 0, 1000, source="", queue=src_queue)]
    tasks += [task("bolt", t, 1000, 20_000, source="src", queue=q) for t, q in zip((2, 3, 4), depths, strict=True)]
    return observation(COMPS, tasks)


def test_pending_input_is_a_queue_over_the_mark_or_over_half_of_it_and_growing() -> None:
    assert detect_pending(queues(32, 0, 0), TH) == []
    (s,) = detect_pending(queues(33, 0, 0), TH)
    assert (s.component, s.task, s.line) == ("bolt", 2, "task 2 of bolt has 33 batches of input pending (over 32)")
    before = queues(10, 20, 17)
    assert detect_pending(queues(16, 0, 0), TH, before) == []  # growing, but not over half
    assert detect_pending(queues(0, 20, 0), TH, before) == []  # over half, not growing
    (s,) = detect_pending(queues(0, 0, 18), TH, before)
    assert s.line == "task 4 of bolt has 18 batches of input pending (up from 17, over half of 32)"
    assert detect_pending(queues(0, 0, 0, src_queue=60), TH) == []  # a spout's queue holds acks
    report = diagnose(queues(33, 0, 0), TH)  # no stream manager named it: the queue does
    assert report.diagnoses == (Diagnosis(
        Kind.UNDER_PROVISIONED, "bolt", "bolt is under-provisioned: its tasks were busy 67%, 67%, 67% of the window; "
                                        "task 2 of bolt has 33 batches of input pending (over 32)"),)


def rates(slow_useful_ms: float, slow_in: float = 10_000, *, queue: float = 60) -> TopologyObservation:
    """Peers at 1,000 records/s of useful time (10,000 records in 10 s); task 4 as given."""
    tasks = [spout_task("src", 1, 30_000, 3000),
             task("bolt", 2, 10_000, 10_000, source="src", container=1),
             task("bolt", 3, 10_000, 10_000, source="src", container=1),
             task("bolt", 4, slow_in, slow_useful_ms, source="src", queue=queue, container=2)]
    return observation(COMPS, tasks)


def test_a_slow_task_is_under_half_its_peers_median_on_input_within_a_quarter_of_theirs() -> None:
    assert detect_slow(rates(20_000), TH) == []  # exactly half
    (s,) = detect_slow(rates(20_001), TH)
    assert (s.kind, s.task, s.container) == (SymptomKind.SLOW_TASK, 4, 2)
    assert s.line == ("task 4 of bolt is slow: 500 records/s of useful time against its peers' median 1,000 (below "
                      "50%) on similar input (10,000 records against 10,000)")
    assert len(detect_slow(rates(29_000, slow_in=12_500), TH)) == 1  # input 25% over: still similar
    assert detect_slow(rates(29_000, slow_in=12_501), TH) == []
    assert len(detect_slow(rates(29_000, slow_in=7_500), TH)) == 1
    assert detect_slow(rates(29_000, slow_in=7_499), TH) == []
    assert detect_slow(rates(29_000), Thresholds(min_records=10_001)) == []
    assert len(detect_slow(rates(29_000), Thresholds(min_records=10_000))) == 1


def test_a_slow_task_is_a_diagnosis_only_where_its_component_holds_the_topology_back() -> None:
    assert diagnose(rates(29_000, queue=0), TH).diagnoses == ()
    (d,) = diagnose(rates(29_000), TH).diagnoses
    assert (d.kind, d.component, d.task, d.container) == (Kind.SLOW_INSTANCE, "bolt", 4, 2)
    assert d.explanation.endswith("(over 32): restart container 2")
    unplaced = observation(COMPS, [t if t.task != 4 else task("bolt", 4, 10_000, 29_000, source="src", queue=60)
                                   for t in rates(29_000).tasks])
    (d,) = diagnose(unplaced, TH).diagnoses
    assert (d.container, d.explanation.endswith("(over 32): its container is unknown")) == (None, True)


def fed(hot: float, *, peers: tuple[float, float] = (1000, 1000)) -> TopologyObservation:
    tasks = [spout_task("src", 1, 3000, 3000), task("bolt", 2, peers[0], 10_000, source="src"),
             task("bolt", 3, peers[1], 10_000, source="src"), task("bolt", 4, hot, 10_000, source="src", container=3)]
    return observation(COMPS, tasks)


def test_skew_is_a_task_fed_twice_its_peers_median_or_more() -> None:
    assert detect_skew(fed(1999), TH) == []
    (s,) = detect_skew(fed(2000), TH)
    assert (s.kind, s.task, s.container) == (SymptomKind.SKEW, 4, 3)
    assert s.line == ("task 4 of bolt received 2,000 records in the 30 s window, 2.0 times its peers' median 1,000 "
                      "(2 times at most)")
    (s,) = detect_skew(fed(150, peers=(0, 0)), TH)
    assert s.line == "task 4 of bolt received 150 records in the 30 s window, its peers' median 0 (2 times at most)"
    assert detect_skew(fed(99, peers=(0, 0)), TH) == []  # below the records that mean anything
    assert len(detect_skew(fed(100, peers=(0, 0)), TH)) == 1
    # reported without backpressure: scaling is not what it needs, but the operator should know
    assert [d.kind for d in diagnose(fed(2000), TH).diagnoses] == [Kind.DATA_SKEW]


def idle(*busy_ms: float, bp_ms: float = 0, queue: float = 0, parallelism: int = 3) -> TopologyObservation:
    comps = chain(("src", 1), ("bolt", parallelism))
    tasks = [spout_task("src", 1, 3000, 20_000)]
    tasks += [task("bolt", t, 100, b, source="src", queue=queue) for t, b in zip((2, 3, 4), busy_ms, strict=False)]
    return observation(comps, tasks, [ContainerWindow(1, 30, bp_ms)])


def test_over_provisioned_is_every_task_under_the_idle_share_without_backpressure() -> None:
    (d,) = diagnose(idle(8999, 1000, 100), TH).diagnoses
    assert d == Diagnosis(Kind.OVER_PROVISIONED, "bolt", "bolt is over-provisioned: its 3 tasks were busy 30%, 3%, 0% "
                                                         "of the 30 s window (all below 30%), without backpressure")
    assert diagnose(idle(9000, 1000, 100), TH).diagnoses == ()  # one task at the threshold
    assert diagnose(idle(8999, 1000, 100, bp_ms=3001), TH).diagnoses == ()
    assert len(diagnose(idle(8999, 1000, 100, bp_ms=3000), TH).diagnoses) == 1
    assert diagnose(idle(8999, 1000, parallelism=3), TH).diagnoses == ()  # a task did not report
    assert diagnose(idle(1000, parallelism=1), TH).diagnoses == ()  # one task cannot shrink
    assert [d.kind for d in diagnose(idle(1000, 1000, 1000, queue=40), TH).diagnoses] == [Kind.UNDER_PROVISIONED]
