"""The connector cores: Storm's OffsetManager commit rule, retries with backoff, the emit
allowance, positions for state, and the acked sink's batching."""

import random

from heron_py.connectors.base import AckedSink, BatchPolicy, OffsetTracker, ReplayableSource, RetryPolicy
from heron_py.connectors.common import Reconnect
from heron_py.connectors.sink import SinkLoop
from tests.fakes import ManualClock


def test_commit_only_up_to_the_lowest_contiguous_acked_offset():
    t = OffsetTracker(committed=10)
    for off in range(10, 15):
        t.add_emitted(off)
    t.add_acked(11)
    t.add_acked(12)
    assert t.next_commit() is None  # 10 is still in flight
    t.add_acked(10)
    assert t.next_commit() == 13
    t.commit(13)
    t.add_acked(14)
    assert t.next_commit() is None  # 13 in flight: nothing new
    t.add_acked(13)
    assert t.next_commit() == 15


def test_gaps_in_the_log_are_stepped_over():
    t = OffsetTracker(committed=0)
    for off in (0, 3, 7):  # a compacted log: 1, 2, 4-6 do not exist
        t.add_emitted(off)
    t.add_acked(0)
    assert t.next_commit() == 3
    t.add_acked(7)
    t.add_acked(3)
    assert t.next_commit() == 8


def test_commits_never_run_ahead_of_acks_under_random_acks_and_fails():
    rng = random.Random(7)
    src = ReplayableSource(retry=RetryPolicy(initial_s=0.0, max_retries=-1))
    src.assign("p", 0)
    acked: set[int] = set()
    now = 0.0
    for off in range(500):
        assert src.emitted("p", off, off) == ("p", off)
    pending = list(range(500))
    while pending:
        rng.shuffle(pending)
        off = pending.pop()
        if rng.random() < 0.3:
            src.fail(("p", off), now)
            pending.append(off)
            src.due_retries(now)
        else:
            src.ack(("p", off))
            acked.add(off)
        c = src.commits().get("p")
        if c is not None:
            assert set(range(c)) <= acked, f"commit {c} ran ahead of the acks"
            src.committed({"p": c})
    assert src.commits() == {} and src.trackers["p"].committed == 500


def test_retry_backoff_is_exponential_and_capped_and_gives_up_after_max():
    policy = RetryPolicy(initial_s=0.5, multiplier=2.0, max_delay_s=3.0, max_retries=3)
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    gave_up = []
    src = ReplayableSource(retry=policy, on_give_up=lambda p, o, n, rec: gave_up.append((p, o, n, rec)))
    src.assign("p", 0)
    src.emitted("p", 0, "r0")
    src.emitted("p", 1, "r1")
    assert src.fail(("p", 0), now=100.0)
    assert src.due_retries(100.4) == []
    assert src.due_retries(100.5) == [(("p", 0), "r0")]
    assert src.fail(("p", 0), now=101.0) and src.due_retries(101.9) == [] and len(src.due_retries(102.0)) == 1
    assert src.fail(("p", 0), now=110.0)
    assert not src.fail(("p", 0), now=120.0)  # the 4th failure: past max_retries 3
    assert gave_up == [("p", 0, 4, "r0")]  # the record too: it is no longer pending
    assert src.stats.given_up == 1 and src.stats.retries == 2  # the third was never re-emitted
    src.ack(("p", 1))
    assert src.commits() == {"p": 2}  # given up: committed past, as Storm does


def test_max_uncommitted_stops_new_emits_until_a_commit():
    src = ReplayableSource(max_uncommitted=3)
    src.assign("p", 0)
    for off in range(3):
        assert src.may_emit("p")
        src.emitted("p", off, None)
    assert not src.may_emit("p")
    for off in range(3):
        src.ack(("p", off))
    assert not src.may_emit("p")  # acked but not committed still counts, as in Storm
    src.committed(src.commits())
    assert src.may_emit("p")


def test_max_in_flight_frees_room_at_each_ack_without_a_commit():
    src = ReplayableSource(max_in_flight=3)
    src.assign("p", 0)
    for off in range(3):
        assert src.may_emit("p")
        src.emitted("p", off, None)
    assert not src.may_emit("p")
    src.ack(("p", 1))  # acked out of order: the commit point stays at 0
    assert src.may_emit("p") and src.commits() == {}
    src.emitted("p", 3, None)
    assert not src.may_emit("p")
    src.fail(("p", 0), 0.0)  # failed and waiting for its retry: still in flight
    assert not src.may_emit("p")
    src.ack(("p", 0))
    assert src.may_emit("p")
    assert not src.may_emit("unknown")


def test_stale_emits_and_late_acks_are_ignored():
    src = ReplayableSource()
    src.assign("p", 5)
    assert src.emitted("p", 4, None) is None  # below the commit point
    assert src.emitted("p", 5, None) == ("p", 5)
    assert src.emitted("p", 5, None) is None  # in flight already
    src.revoke("p")
    assert src.ack(("p", 5)) is False
    assert src.emitted("q", 0, None) is None  # not assigned


def test_emitted_many_records_a_batch_and_skips_the_stale_records():
    """A batch's ids in order, None for each stale record (below the commit, already in flight,
    acked); the fetched mark, the records in flight and the stats as one record at a time."""
    src = ReplayableSource()
    src.assign("p", 10)
    src.emitted("p", 12, "r12")  # in flight before the batch
    src.emitted("p", 13, "r13")
    src.ack(("p", 13))  # acked, not committed
    batch = [(9, "r9"), (10, "r10"), (12, "r12"), (13, "r13"), (11, "r11"), (15, "r15")]
    assert src.emitted_many("p", batch) == [None, ("p", 10), None, None, ("p", 11), ("p", 15)]
    assert src.emitted_many("p", batch) == [None] * 6  # all stale the second time
    assert src.pending == {("p", o): ("p", o, f"r{o}", 0) for o in (10, 11, 12, 15)}
    assert src.trackers["p"].fetched == 16 and src.trackers["p"].emitted == {10, 11, 12, 15}
    assert (src.stats.emitted, src.stats.acked) == (5, 1)
    assert src.emitted_many("gone", [(1, "x"), (2, "y")]) == [None, None]  # not assigned


def test_a_source_without_offsets_counts_what_is_in_flight_and_commits_nothing():
    """Redis's way (its pending entries list keeps each entry's state): no offsets, the bound on
    records in flight counted per partition, retries and give-ups as with offsets."""
    gave_up: list[tuple[str, int, int, str]] = []
    src = ReplayableSource(retry=RetryPolicy(max_retries=1), max_in_flight=3, offsets=False,
                           on_give_up=lambda p, o, f, r: gave_up.append((p, o, f, r)))
    src.assign("s", 0)
    assert src.emitted_many("s", [(1, "a"), (2, "b"), (1, "a")]) == [("s", 1), ("s", 2), None]
    assert src.may_emit("s") and src.emitted("s", 3, "c") == ("s", 3) and not src.may_emit("s")
    assert src.ack_many([("s", 1), ("s", 9)]) == ["a"] and src.may_emit("s")
    assert src.fail(("s", 2), now=5.0) is True and src.pending[("s", 2)] == ("s", 2, "b", 1)
    assert src.due_retries(now=5.0) == [(("s", 2), "b")]
    assert src.fail(("s", 2), now=6.0) is False and gave_up == [("s", 2, 2, "b")]
    assert src.ack(("s", 3)) is True and src.in_flight == {"s": 0} and src.pending == {}
    assert src.commits() == {} and src.trackers["s"].acked == set()  # nothing kept per offset
    src.revoke("s")
    assert src.in_flight == {} and not src.may_emit("s")


def test_positions_restore_and_unknown_start():
    src = ReplayableSource()
    src.assign("p", -1)  # earliest/latest: learned from the first record
    src.emitted("p", 42, None)
    src.emitted("p", 43, None)
    src.ack(("p", 42))
    assert src.positions() == {"p": 43}
    src.restore({"p": 43, "q": 7})
    assert src.pending == {} and src.positions() == {"p": 43, "q": 7}
    assert src.emitted("p", 42, None) is None and src.emitted("p", 43, None) == ("p", 43)


def test_acked_sink_batches_by_size_and_delay_and_maps_outcomes():
    sink: AckedSink[str] = AckedSink(BatchPolicy(max_size=3, max_delay_s=1.0))
    assert sink.add("a", 0.0) is None
    assert sink.add("b", 0.2) is None
    assert sink.due(0.9) is None
    assert sink.due(1.0) == ["a", "b"]
    assert sink.add("c", 2.0) is None and sink.add("d", 2.1) is None
    batch = sink.add("e", 2.2)
    assert batch == ["c", "d", "e"]
    bid = sink.started(batch)
    assert sink.outstanding() == 3
    assert sink.confirmed(bid) == ["c", "d", "e"] and sink.outstanding() == 0
    bid2 = sink.started(["x"])
    assert sink.failed(bid2) == ["x"] and sink.confirmed(bid2) == []




def _loop(clock: ManualClock, down: list[bool]) -> tuple[SinkLoop[str, int], dict[str, list[object]]]:
    """A SinkLoop over a system that is reachable unless ``down[0]``; records every callback."""
    seen: dict[str, list[object]] = {"written": [], "acked": [], "failed": [], "recovered": []}
    conn = Reconnect(RetryPolicy(initial_s=1.0, multiplier=2.0, max_delay_s=4.0))

    def write(batch: list[str]) -> int:
        if down[0]:
            raise ConnectionError("refused")
        seen["written"].append(list(batch))
        return len(batch)

    def confirmed(batch: list[str], n: int) -> None:
        assert n == len(batch)
        seen["acked"].extend(batch)

    def failed(batch: list[str], e: Exception, now: float) -> None:
        conn.failed(now)
        seen["failed"].extend(batch)

    loop: SinkLoop[str, int] = SinkLoop(BatchPolicy(2, 0.5), conn, clock, write, confirmed, failed,
                                        lambda: seen["recovered"].append(clock.t))
    return loop, seen


def test_sink_loop_acks_after_the_write_fails_the_batch_and_backs_off_when_unreachable():
    clock, down = ManualClock(0.0), [False]
    loop, seen = _loop(clock, down)
    assert not loop.busy()
    loop.add("a")
    assert seen["written"] == [] and loop.poll() is True  # one input, its delay not passed: idle
    assert loop.busy()  # buffered, not written: an in-process run keeps polling the bolt
    loop.add("b")  # full: written at once
    assert seen["written"] == [["a", "b"]] and seen["acked"] == ["a", "b"] and not loop.busy()
    loop.add("c")
    clock.t = 0.6
    assert loop.poll() is False and seen["written"][-1] == ["c"]  # delay passed
    down[0] = True
    loop.add("d")
    loop.add("e")  # the write fails: both failed, a 1 s backoff
    assert seen["failed"] == ["d", "e"] and loop.conn.next_try == 1.6
    loop.add("f")
    loop.add("g")  # full during the backoff: kept, not written, not failed
    assert seen["failed"] == ["d", "e"] and loop.sink.buffer == ["f", "g"] and loop.busy()
    assert loop.poll() is False  # still in the backoff
    down[0] = False
    clock.t = 1.6
    loop.poll()  # the backoff passed: what waited goes out at once, and the outage ended
    assert seen["written"][-1] == ["f", "g"] and seen["recovered"] == [1.6] and loop.conn.failures == 0
    assert loop.sink.outstanding() == 0


def test_sink_loop_drain_writes_the_buffer_even_in_a_backoff():
    clock, down = ManualClock(0.0), [True]
    loop, seen = _loop(clock, down)
    loop.add("a")
    loop.add("b")  # fails: backoff until 1.0
    loop.add("c")
    down[0] = False
    loop.drain()
    assert seen["written"] == [["c"]] and seen["acked"] == ["c"] and seen["failed"] == ["a", "b"]


def test_ack_many_is_ack_per_id_and_returns_the_acked_records():
    one, many = ReplayableSource(), ReplayableSource()
    for s in (one, many):
        s.assign("p", 0)
        s.assign("q", 0)
        for o in range(4):
            s.emitted("p", o, f"p{o}")
        s.emitted("q", 0, "q0")
    ids = [("p", 2), ("q", 0), ("p", 0), ("p", 2), ("p", 9)]  # a duplicate and an unknown id
    assert many.ack_many(ids) == ["p2", "q0", "p0"]
    assert [one.ack(k) for k in ids] == [True, True, True, False, False]
    assert many.pending.keys() == one.pending.keys() == {("p", 1), ("p", 3)}
    for part in ("p", "q"):
        assert (many.trackers[part].acked, many.trackers[part].emitted) == \
            (one.trackers[part].acked, one.trackers[part].emitted)
    assert many.stats.acked == one.stats.acked == 3
