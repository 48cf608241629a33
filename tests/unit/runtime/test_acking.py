"""The XOR tracker (heron_py.acking.tracker) under any interleaving: exactly the fully-acked roots
complete, once; and on the harness's clock (ClockedTracker), each root times out at exactly T."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from heron_py.acking.roots import RootTable
from heron_py.acking.tracker import ClockedTracker, Outcome, XorTracker
from heron_py.testing import ManualClock


def _tree_events(rng: random.Random, spout_task: int, root: int, depth: int):
    """Events of one root's tuple tree: the spout's init and each bolt's ack, as Storm sends
    them: init = XOR of the keys sent; ack of t = t's key XOR the keys emitted anchored to t."""
    events = []
    frontier = [rng.getrandbits(64) for _ in range(rng.randint(1, 3))]
    init = 0
    for k in frontier:
        init ^= k
    events.append((spout_task, root, init))
    for _ in range(depth):
        nxt = []
        for k in frontier:
            children = [rng.getrandbits(64) for _ in range(rng.randint(0, 2))]
            v = k
            for c in children:
                v ^= c
            events.append((spout_task, root, v))
            nxt.extend(children)
        frontier = nxt
    events.extend((spout_task, root, k) for k in frontier)  # leaves: acked, nothing emitted
    return events


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=1, max_value=20),
       st.data())
def test_any_interleaving_completes_exactly_the_fully_acked_roots(seed, nroots, data):
    rng = random.Random(seed)
    trees = {}
    for r in range(nroots):
        task = rng.choice([1, 2, 3])
        trees[(task, r)] = _tree_events(rng, task, r, depth=rng.randint(0, 3))
    # drop the last ack of some roots: those must not complete
    incomplete = {k for k in trees if len(trees[k]) > 1 and data.draw(st.booleans())}
    events = [e for k, evs in trees.items() for e in (evs[:-1] if k in incomplete else evs)]
    events = data.draw(st.permutations(events))
    tracker = XorTracker(buckets=3)
    done = []
    for task, root, v in events:
        res = tracker.update(task, root, v)
        if res is not None:
            done.append((res.spout_task, res.root, res.outcome))
    assert sorted(done) == sorted((t, r, Outcome.ACKED) for (t, r) in trees if (t, r) not in incomplete)
    assert tracker.pending == len(incomplete)


def test_fail_is_reported_once_and_late_acks_are_ignored():
    t = XorTracker(buckets=3)
    assert t.update(1, 7, 0xABC) is None
    r = t.fail(1, 7)
    assert r is not None and r.outcome is Outcome.FAILED
    assert t.fail(1, 7) is None
    assert t.update(1, 7, 0xABC) is None  # a late ack neither completes nor resurrects
    assert t.pending == 0
    assert t.rotate() == [] and t.rotate() == []


def test_timeout_after_all_buckets_rotate_once_and_never_acked_after():
    t = XorTracker(buckets=3)
    t.update(2, 9, 0x1234)
    assert t.rotate() == []
    assert t.rotate() == []
    [r] = t.rotate()
    assert (r.spout_task, r.root, r.outcome) == (2, 9, Outcome.TIMED_OUT)
    assert t.update(2, 9, 0x1234) is None
    assert t.pending == 0


def test_a_root_table_requires_two_buckets():
    import pytest

    with pytest.raises(ValueError) as e:
        RootTable(1)
    assert str(e.value) == "rotating map needs at least 2 buckets, found 1"


def test_apply_resolves_a_batch_in_record_order_and_reports_unknown_kinds():
    from heron_py.common.framing import ACK_ACK, ACK_FAIL, ACK_INIT, ACK_RECORD, RESULT_ACKED, RESULT_FAILED

    t = XorTracker(buckets=3)
    body = b"".join(ACK_RECORD.pack(*r) for r in [
        (ACK_INIT, 1, 0xA), (ACK_INIT, 2, 0xB), (9, 3, 0x1),  # 9: no such kind
        (ACK_FAIL, 2, 0), (ACK_ACK, 1, 0xA), (ACK_ACK, 2, 0xB),  # 2 failed: its late ack is ignored
        (ACK_ACK, 4, 0x0)])  # a zero for an unknown root creates nothing
    resolved, unknown = t.apply(5, body)
    assert resolved == [(RESULT_FAILED, 2), (RESULT_ACKED, 1)] and unknown == [9]
    assert t.pending == 0


def test_the_same_root_id_under_two_spout_tasks_is_two_roots():
    # root ids are random per spout task, so two tasks may draw the same one: the tracker keys
    # by (task, root), and an ack, fail or timeout of one leaves the other as it was
    t = XorTracker(buckets=2)
    assert t.update(1, 7, 0xA) is None and t.update(2, 7, 0xB) is None
    assert t.pending == 2
    r = t.update(1, 7, 0xA)
    assert r is not None and (r.spout_task, r.root, r.outcome) == (1, 7, Outcome.ACKED)
    assert t.pending == 1
    # a fail after task 1's root was acked (a user's fail of a tuple it acked) is reported: the
    # tracker keeps no acked roots (below), and the spout, which no longer holds it, ignores it
    r = t.fail(1, 7)
    assert r is not None and (r.spout_task, r.root, r.outcome) == (1, 7, Outcome.FAILED)
    assert t.fail(1, 7) is None  # failed once: remembered
    assert t.update(2, 7, 0x1) is None  # task 2's root is live, now 0xB ^ 0x1
    assert t.rotate() == []
    [r] = t.rotate()
    assert (r.spout_task, r.root, r.outcome) == (2, 7, Outcome.TIMED_OUT)
    assert t.pending == 0


# --- ClockedTracker: the same tracker on the test harness's clock ---

def _batch(spout_task: int, *records: tuple[int, int, int]) -> bytes:
    from heron_py.common.framing import ACK_RECORD, MsgType, encode_batch_frame

    body = b"".join(ACK_RECORD.pack(*r) for r in records)
    return encode_batch_frame(spout_task, 2, body, MsgType.ACK_BATCH, len(records))


def _results(t: ClockedTracker) -> dict[int, list[tuple[int, int]]]:
    """Each ACK_RESULT frame's records, checking it is addressed to the task it is filed under."""
    from heron_py.common.framing import BODY_OFFSET, RESULT_RECORD, batch_dest

    out = {}
    for task, frame in t.take_results().items():
        assert batch_dest(frame) == task
        out[task] = list(RESULT_RECORD.iter_unpack(frame[BODY_OFFSET:]))
    return out


def test_clocked_tracker_resolves_xor_trees_fails_and_times_out_at_exactly_t():
    from heron_py.common.framing import ACK_ACK, ACK_FAIL, RESULT_ACKED, RESULT_FAILED, RESULT_TIMED_OUT

    clock = ManualClock(100.0)
    t = ClockedTracker(30.0, clock)
    t.on_ack_batch(_batch(7, (ACK_ACK, 1, 0b101), (ACK_ACK, 2, 0b11), (ACK_ACK, 3, 0b1)))  # the spout's inits
    t.on_ack_batch(_batch(7, (ACK_ACK, 1, 0b100)))
    assert _results(t) == {} and t.next_deadline() == 130.0 and t.pending == 3
    t.on_ack_batch(_batch(7, (ACK_ACK, 1, 0b001), (ACK_FAIL, 2, 0)))
    assert _results(t) == {7: [(RESULT_ACKED, 1), (RESULT_FAILED, 2)]}
    clock.t = 129.999
    t.expire()
    assert _results(t) == {} and t.pending == 1
    clock.t = 130.0
    t.expire()
    assert _results(t) == {7: [(RESULT_TIMED_OUT, 3)]} and t.pending == 0 and t.next_deadline() is None
    # a late ack of a resolved root neither completes nor resurrects it for one timeout after it
    # resolved, as in the stream manager
    t.on_ack_batch(_batch(7, (ACK_ACK, 3, 0b1)))
    clock.t = 159.999
    t.expire()
    t.on_ack_batch(_batch(7, (ACK_ACK, 3, 0b1)))
    assert t.pending == 0 and t.next_deadline() is None and _results(t) == {}


def test_clocked_tracker_times_each_root_from_its_own_first_record_and_updates_do_not_refresh():
    from heron_py.common.framing import ACK_ACK, RESULT_TIMED_OUT

    clock = ManualClock(100.0)
    t = ClockedTracker(30.0, clock)
    t.on_ack_batch(_batch(1, (ACK_ACK, 10, 0xF0)))
    clock.t = 105.0
    t.on_ack_batch(_batch(2, (ACK_ACK, 11, 0xF1)))
    clock.t = 110.5
    t.on_ack_batch(_batch(1, (ACK_ACK, 12, 0xF2)))
    clock.t = 129.0
    t.on_ack_batch(_batch(1, (ACK_ACK, 10, 0x0F)))  # an update late in 10's life does not refresh it
    assert t.next_deadline() == 130.0
    deadlines = []
    for now in (129.999, 130.0, 134.999, 135.0, 140.499, 140.5):
        clock.t = now
        t.expire()
        deadlines.append((now, _results(t), t.next_deadline()))
    assert deadlines == [
        (129.999, {}, 130.0),
        (130.0, {1: [(RESULT_TIMED_OUT, 10)]}, 135.0),
        (134.999, {}, 135.0),
        (135.0, {2: [(RESULT_TIMED_OUT, 11)]}, 140.5),
        (140.499, {}, 140.5),
        (140.5, {1: [(RESULT_TIMED_OUT, 12)]}, None),
    ]


def test_clocked_tracker_opens_a_generation_only_for_a_reading_with_new_roots():
    from heron_py.common.framing import ACK_ACK

    clock = ManualClock(0.0)
    t = ClockedTracker(1.0, clock)
    t.on_ack_batch(_batch(1, (ACK_ACK, 1, 0xAB)))
    for i in range(1, 1000):  # the clock moves often; only acks of the one live root arrive
        clock.t = i / 1000
        t.on_ack_batch(_batch(1, (ACK_ACK, 1, 0x1 << (i % 8))))
        t.expire()
    assert t.generations <= 3 and t.pending == 1
    for i in range(1000, 3000):  # a new root at every reading: one generation per reading within T
        clock.t = i / 1000
        t.on_ack_batch(_batch(1, (ACK_ACK, i, 0xAB)))
        t.expire()
    assert 1000 <= t.generations <= 1002 and t.pending == 1000


def test_clocked_tracker_refuses_a_timeout_of_zero_and_a_record_of_unknown_kind():
    import pytest

    from heron_py.common.framing import ACK_ACK, RESULT_ACKED

    with pytest.raises(ValueError) as e:
        ClockedTracker(0.0, ManualClock(0.0))
    assert str(e.value) == "ack tracker: timeout_s must be above 0 seconds, found 0.0"
    t = ClockedTracker(30.0, ManualClock(0.0))
    with pytest.raises(ValueError) as e:
        t.on_ack_batch(_batch(4, (ACK_ACK, 1, 0xA), (9, 2, 0x1), (ACK_ACK, 1, 0xA)))
    assert str(e.value) == "ACK_BATCH for spout task 4: record kind 9 is not ACK_INIT (1), ACK_ACK (2) or ACK_FAIL (3)"
    assert _results(t) == {4: [(RESULT_ACKED, 1)]}  # the batch's other records were applied


def test_xor_tracker_generations_keep_two_buckets():
    import pytest

    t = XorTracker(buckets=2)
    t.update(1, 5, 0xA)
    assert t.live_in(0) == 1 and t.live_in(1) == 0
    t.grow()  # buckets: new, the root's, the empty oldest
    assert (t.live_in(0), t.live_in(1), t.live_in(2)) == (0, 1, 0)
    assert t.shrink() == []
    t.grow()
    [r] = t.shrink()
    assert (r.spout_task, r.root, r.outcome) == (1, 5, Outcome.TIMED_OUT)
    assert t.update(1, 5, 0xA) is None and t.pending == 0  # remembered as resolved
    with pytest.raises(ValueError) as e:
        t.shrink()
    assert str(e.value) == "rotating map needs at least 2 buckets, found 1"
    m = RootTable(2)
    with pytest.raises(ValueError) as e:
        m.shrink()
    assert str(e.value) == "rotating map keeps at least 2 buckets: cannot drop one of 2"


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=1, max_value=12), st.data())
def test_clocked_tracker_matches_exact_deadlines_under_any_schedule(seed, nroots, data):
    """Each root's records at random readings (its first at t0, the others up to 2 T later, some
    trees missing their last ack): a root is acked at the reading of its last record if that is
    before t0 + T, else timed out at the first reading from t0 + T on; never reported twice, and
    ``next_deadline`` is always the oldest live root's t0 + T."""
    from heron_py.common.framing import ACK_ACK, BODY_OFFSET, RESULT_ACKED, RESULT_RECORD, RESULT_TIMED_OUT

    T = 10.0
    rng = random.Random(seed)
    schedule = []  # (reading, tie-break, task, root, value)
    first, last, complete = {}, {}, {}
    for r in range(nroots):
        task = rng.choice([1, 2])
        events = _tree_events(rng, task, r, depth=rng.randint(0, 2))
        complete[(task, r)] = not (len(events) > 1 and data.draw(st.booleans()))
        if not complete[(task, r)]:
            events = events[:-1]
        t0 = float(rng.randint(0, 30))
        times = [t0] + [t0 + rng.randint(0, 19) for _ in events[1:]]  # within T of a timeout
        first[(task, r)], last[(task, r)] = t0, max(times)
        schedule.extend((at, rng.random(), task, r, v) for at, (_, _, v) in zip(times, events, strict=True))
    schedule.sort()
    readings = sorted({s[0] for s in schedule} | {100.0})
    expected = {}
    for key, t0 in first.items():
        if complete[key] and last[key] < t0 + T:
            expected[key] = (RESULT_ACKED, last[key])
        else:
            expected[key] = (RESULT_TIMED_OUT, min(x for x in readings if x >= t0 + T))
    clock = ManualClock(0.0)
    t = ClockedTracker(T, clock)
    seen = {}
    for now in readings:
        clock.t = now
        t.expire()
        for _, _, task, root, v in [s for s in schedule if s[0] == now]:
            t.on_ack_batch(_batch(task, (ACK_ACK, root, v)))
        for task, frame in t.take_results().items():
            for outcome, root in RESULT_RECORD.iter_unpack(frame[BODY_OFFSET:]):
                assert (task, root) not in seen
                seen[(task, root)] = (outcome, now)
        live = [t0 + T for key, t0 in first.items() if t0 <= now and key not in seen]
        assert t.next_deadline() == (min(live) if live else None)
        assert t.pending == len(live)
    assert seen == expected and t.pending == 0


def test_acked_roots_leave_nothing_behind_failed_and_timed_out_ones_are_remembered():
    """The tracker's memory is its live roots plus those failed or timed out within a timeout:
    an acked root's every key came in twice, so nothing of it is left to arrive and it is not
    kept (a million acked roots would otherwise stay for a timeout)."""
    t = XorTracker(buckets=3)
    t.update(1, 6000, 0xE)
    t.rotate(), t.rotate()
    assert [r.root for r in t.rotate()] == [6000]  # timed out
    for root in range(1, 1001):
        t.update(1, root, root * 7919)
    for root in range(1, 1001):
        assert t.update(1, root, root * 7919) is not None  # acked
    t.update(1, 5000, 0xF)
    assert t.fail(1, 5000) is not None
    table = t.table(1)
    assert table.live == 0 and table.roots() == [] and sorted(table.resolved()) == [5000, 6000]
    # their late records are still ignored; a late record of an acked root makes an entry
    # that times out like any other (the spout holds no such root and ignores the result)
    assert t.update(1, 5000, 0x1) is None and t.update(1, 6000, 0x1) is None and t.pending == 0
    assert t.update(1, 17, 0x1) is None and t.pending == 1


def test_clocked_tracker_opens_no_second_generation_for_the_same_reading():
    """New roots at the reading of the newest generation go into it: generations number the
    distinct readings, whatever their count (a reading compared with an older generation's, or
    an equal one taken as newer, would open one per batch)."""
    from heron_py.common.framing import ACK_ACK

    clock = ManualClock(0.0)
    t = ClockedTracker(1.0, clock)
    for i, reading in enumerate((0.1, 0.2, 0.3)):
        clock.t = reading
        t.on_ack_batch(_batch(1, (ACK_ACK, i, 0xAB)))
    opened = t.generations
    for root in range(100, 105):  # five batches of new roots at the same reading
        t.on_ack_batch(_batch(1, (ACK_ACK, root, 0xAB)))
        t.expire()
    assert t.generations == opened and t.pending == 8
    clock.t = 1.3  # the roots of 0.3, the five included, time out together at 0.3 + T
    t.expire()
    assert t.pending == 0


def test_an_ack_result_frame_names_its_spout_task_and_its_record_count():
    """ACK_RESULT's wire format: the batch header's destination is the spout task, its source 0
    (the stream manager, no task), its count the RESULT records in the body."""
    from heron_py.acking.tracker import result_frame
    from heron_py.common.framing import BATCH_HEADER, HEADER_SIZE, RESULT_RECORD, MsgType, frame_type

    body = RESULT_RECORD.pack(1, 7) + RESULT_RECORD.pack(2, 8) + RESULT_RECORD.pack(1, 9)
    frame = result_frame(5, body)
    assert frame_type(frame) == MsgType.ACK_RESULT
    assert BATCH_HEADER.unpack_from(frame, HEADER_SIZE) == (5, 0, 3)
    assert frame.endswith(body)
