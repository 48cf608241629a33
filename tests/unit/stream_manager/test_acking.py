"""The XOR tracker under any interleaving: exactly the fully-acked roots complete, once."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_manager.acking import Outcome, RotatingMap, XorTracker


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
    tracker = XorTracker()
    done = []
    for task, root, v in events:
        res = tracker.update(task, root, v)
        if res is not None:
            done.append((res.spout_task, res.root, res.outcome))
    assert sorted(done) == sorted((t, r, Outcome.ACKED) for (t, r) in trees if (t, r) not in incomplete)
    assert tracker.pending == len(incomplete)


def test_fail_is_reported_once_and_late_acks_are_ignored():
    t = XorTracker()
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


def test_rotating_map_requires_two_buckets():
    import pytest

    with pytest.raises(ValueError) as e:
        RotatingMap(1)
    assert str(e.value) == "rotating map needs at least 2 buckets, found 1"


def test_apply_resolves_a_batch_in_record_order_and_reports_unknown_kinds():
    from heron_py.common.framing import ACK_ACK, ACK_FAIL, ACK_INIT, ACK_RECORD, RESULT_ACKED, RESULT_FAILED

    t = XorTracker()
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
    assert t.fail(1, 7) is None  # resolved already under task 1
    assert t.update(2, 7, 0x1) is None  # task 2's root is live, now 0xB ^ 0x1
    assert t.rotate() == []
    [r] = t.rotate()
    assert (r.spout_task, r.root, r.outcome) == (2, 7, Outcome.TIMED_OUT)
    assert t.pending == 0
