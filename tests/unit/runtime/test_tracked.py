"""The ids of received tracked tuples (heron_py.runtime.tracked): the Python reference and its
typed twin (tracked.pyx, compiled in its place) write the same ACK_BATCH bodies, record for
record, over random streams of acks; both read and write the same id arrays; a ``Root`` reads as
heronpy's ``roots`` (a sequence of one triple) in both; and the XOR each body carries per root
is the XOR of the acked ids and ack values (an independent model, not the reference)."""

from __future__ import annotations

import pickle
import random
from array import array
from collections import defaultdict
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import heron_py.runtime.tracked as tracked
from heron_py.api.tuple import TrackedTuple
from heron_py.common.framing import ACK_ACK, ACK_RECORD
from tests.unit.runtime import twins

MODULE = "heron_py.runtime.tracked"
IMPLEMENTATIONS = ["reference", "typed"]
TOP = 2**64 - 1


def _impl(name: str) -> ModuleType:
    return twins.implementation(MODULE, name)


def _ops(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """Acks of one-root and several-root tuples over a few roots of a few spout tasks (runs of
    one root, as a count task sees a sentence's words, and interleavings), drains between."""
    roots = [(rng.choice((1, 3, 7)), rng.choice((0, TOP, rng.getrandbits(64)))) for _ in range(rng.randint(1, 6))]
    ops: list[tuple[Any, ...]] = []
    for _ in range(n):
        p = rng.random()
        task, root = rng.choice(roots)
        ack_val = 0 if rng.random() < 0.5 else rng.getrandbits(64)
        if p < 0.75:
            for _ in range(rng.randint(1, 5)):  # a run of one root
                ops.append(("add", (task, root, rng.getrandbits(64)), ack_val))
        elif p < 0.9:
            triples = tuple((t, r, rng.getrandbits(64)) for t, r in rng.sample(roots, rng.randint(0, len(roots))))
            ops.append(("triples", triples, ack_val))
        else:
            ops.append(("drain",))
    ops.append(("drain",))
    return ops


def _run(mod: ModuleType, ops: list[tuple[Any, ...]]) -> list[Any]:
    log = mod.AckLog()
    out: list[Any] = []
    for op in ops:
        if op[0] == "add":
            log.add(mod.Root(*op[1], op[2]))
        elif op[0] == "triples":
            log.add_triples(op[1], op[2])
        else:
            n = len(log)
            bodies = {task: bytes(body) for task, body in log.drain().items()}
            assert sum(len(b) for b in bodies.values()) == n * ACK_RECORD.size and len(log) == 0
            out.append(bodies)
    return out


def _xor_per_root(ops: list[tuple[Any, ...]]) -> list[dict[tuple[int, int], int]]:
    """Per drain, the XOR of what was acked per (spout task, root): id XOR ack value."""
    out, cur = [], defaultdict(int)
    for op in ops:
        if op[0] == "add":
            t, r, i = op[1]
            cur[(t, r)] ^= i ^ op[2]
        elif op[0] == "triples":
            for t, r, i in op[1]:
                cur[(t, r)] ^= i ^ op[2]
        else:
            out.append(dict(cur))
            cur = defaultdict(int)
    return out


def _body_xor(bodies: dict[int, bytes]) -> dict[tuple[int, int], int]:
    seen: dict[tuple[int, int], int] = defaultdict(int)
    for task, body in bodies.items():
        for kind, root, value in ACK_RECORD.iter_unpack(body):
            assert kind == ACK_ACK
            seen[(task, root)] ^= value
    return dict(seen)


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=0, max_value=2**32))
def test_the_typed_ack_log_writes_the_references_bodies_and_they_carry_each_roots_xor(seed):
    ops = _ops(random.Random(seed), 80)
    ref = _run(_impl("reference"), ops)
    assert _run(_impl("typed"), ops) == ref
    expected = _xor_per_root(ops)
    assert [_body_xor(b) for b in ref] == [{k: v for k, v in e.items()} for e in expected]


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_consecutive_acks_of_one_root_are_one_record_and_others_are_kept_in_order(name):
    mod = _impl(name)
    log = mod.AckLog()
    log.add(mod.Root(1, 10, 0x1))
    log.add(mod.Root(1, 10, 0x2, 0x8))
    log.add(mod.Root(3, 10, 0x4))  # same root id, another spout task: not merged
    log.add(mod.Root(1, 11, 0x10))
    log.add(mod.Root(1, 10, 0x20))  # root 10 again after 11: a record of its own
    assert len(log) == 4
    bodies = log.drain()
    assert list(bodies) == [1, 3]
    assert list(ACK_RECORD.iter_unpack(bodies[1])) == [(ACK_ACK, 10, 0x1 ^ 0x2 ^ 0x8), (ACK_ACK, 11, 0x10),
                                                       (ACK_ACK, 10, 0x20)]
    assert list(ACK_RECORD.iter_unpack(bodies[3])) == [(ACK_ACK, 10, 0x4)]
    assert log.drain() == {} and len(log) == 0
    log.add(mod.Root(1, 11, 0x40))  # a drain ends the run: not merged into the drained record
    assert list(ACK_RECORD.iter_unpack(log.drain()[1])) == [(ACK_ACK, 11, 0x40)]


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_id_arrays_are_read_and_written_alike(name):
    mod = _impl(name)
    ids = array("Q", [1, 0, TOP, 3, TOP, 5])
    roots = mod.roots_of(ids)
    assert [(r.task, r.root, r.id, r.ack_val) for r in roots] == [(1, 0, TOP, 0), (3, TOP, 5, 0)]
    assert [tuple(r) for r in mod.roots_of([1, 2, 3])] == [((1, 2, 3),)]  # any sequence, not only an array
    with pytest.raises(ValueError) as e:
        mod.roots_of(array("Q", [1, 2, 3, 4]))
    assert str(e.value) == "id array: expected 3 ids a tuple (spout task, root id, tuple id), found 4 ids"

    r = mod.Root(2, 99, 0x5)
    e1, e2 = (lambda g: (g.draw(), g.draw()))(mod.Edges(42))
    edges = mod.Edges(42)
    out = mod.new_ids(r, edges)
    assert type(out) is array and out.typecode == "Q" and list(out) == [2, 99, e1] and r.ack_val == e1
    mod.anchor(out, r, edges)
    assert list(out) == [2, 99, e1, 2, 99, e2] and r.ack_val == e1 ^ e2
    spout = mod.ids_of(4, 7, 8)
    mod.add_ids(spout, 4, 9, 10)
    assert type(spout) is array and list(spout) == [4, 7, 8, 4, 9, 10]


def test_both_edge_generators_draw_the_same_nonzero_ids():
    ref, typed = _impl("reference"), _impl("typed")
    for seed in (0, 1, TOP, (1 << 64) - ref.GOLDEN, 0x1234_5678_9ABC_DEF0):
        a, b = ref.Edges(seed), typed.Edges(seed)
        draws = [a.draw() for _ in range(2000)]
        assert draws == [b.draw() for _ in range(2000)]
        assert all(0 < d <= TOP for d in draws) and len(set(draws)) == 2000
    # splitmix64's known first output from state 0 (Vigna's reference implementation)
    assert ref.Edges(0).draw() == 0xE220A8397B1DCDAF
    # the one state that gives 0 is skipped: the draw after it is the next state's
    assert ref.Edges((1 << 64) - ref.GOLDEN).draw() == ref.Edges(0).draw()


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_a_root_reads_as_heronpys_roots_a_sequence_of_one_triple(name):
    mod = _impl(name)
    r = mod.Root(1, TOP, 7)
    assert len(r) == 1 and bool(r) and r[0] == r[-1] == (1, TOP, 7) and list(r) == [(1, TOP, 7)]
    (t, root, i), = r
    assert (t, root, i) == (1, TOP, 7)
    with pytest.raises(IndexError) as e:
        r[1]
    assert str(e.value) == "Root index out of range (a Root holds one root)"
    assert r == ((1, TOP, 7),) and r == mod.Root(1, TOP, 7) and r != ((1, TOP, 8),) and r != mod.Root(1, 0, 7)
    assert hash(r) == hash(((1, TOP, 7),)) and repr(r) == f"((1, {TOP}, 7),)"
    assert mod.received_roots(((1, 2, 3),)) == mod.Root(1, 2, 3)
    assert type(mod.received_roots(((1, 2, 3),))) is mod.Root
    several = ((1, 2, 3), (4, 5, 6))
    assert mod.received_roots(several) is several and mod.received_roots(()) == ()


def test_a_root_pickles_with_its_ack_value_as_a_tuple_holding_it_does():
    """(in the form the package imported: a pickle names the importable module)"""
    r = tracked.Root(1, TOP, 7, 0xAB)
    back = pickle.loads(pickle.dumps(r))
    assert type(back) is tracked.Root and (back.task, back.root, back.id, back.ack_val) == (1, TOP, 7, 0xAB)
    tup = pickle.loads(pickle.dumps(TrackedTuple(None, "c", "default", 0, ["w"], 0.0, r)))
    assert tup.roots == r and tup.ack_val == 0xAB


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_a_tuples_ack_val_is_its_roots_when_it_has_one_root(name):
    mod = _impl(name)
    r = mod.Root(1, 2, 3)
    one = TrackedTuple(None, "c", "default", 0, ["w"], 0.0, r)
    assert one.ack_val == 0
    one.ack_val ^= 0x30
    assert r.ack_val == 0x30 and one.ack_val == 0x30 and "ack_val" not in one.__dict__
    several = TrackedTuple(None, "c", "default", 0, ["w"], 0.0, ((1, 2, 3), (1, 4, 5)))
    assert several.ack_val == 0
    several.ack_val ^= 0x7
    assert several.ack_val == 0x7 and several.__dict__["ack_val"] == 0x7


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_deliver_makes_the_tuples_the_host_made_and_stops_at_a_raise(name):
    mod = _impl(name)
    got: list[Any] = []
    vals = [["a"], ["b"], ["c"]]
    ids = array("Q", [1, 10, 0x1, 1, 11, 0x2, 3, TOP, TOP])
    mod.deliver(got.append, TrackedTuple, "split", 4, 12.5, vals, ids)
    assert [type(t) for t in got] == [TrackedTuple] * 3
    assert got == [TrackedTuple(None, "split", "default", 4, v, 12.5, mod.Root(*ids[3 * i:3 * i + 3]))
                   for i, v in enumerate(vals)]
    assert got[2].roots == ((3, TOP, TOP),) and got[2].values == ["c"] and got[2].ack_val == 0
    seen: list[Any] = []

    def process(tup: Any) -> None:
        seen.append(tup.values)
        if tup.values == ["b"]:
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        mod.deliver(process, TrackedTuple, "split", 4, 12.5, vals, ids)
    assert seen == [["a"], ["b"]]


class _Metrics:
    acked = 0
    process_ms_total = 0.0
    process_samples = 0


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_a_bolts_ack_counts_samples_1_in_every_and_logs_the_roots(name):
    mod = _impl(name)
    log, m, slow = mod.AckLog(), _Metrics(), []
    clock = iter([100.0, 103.0]).__next__
    ack = mod.BoltAck(log, m, 3, slow.append, TrackedTuple, clock).ack
    tups = [TrackedTuple(None, "c", "default", 0, [i], 99.5, mod.Root(1, 10 + i // 3, 1 << i)) for i in range(4)]
    tups[3].ack_val = 0x100
    for t in tups:
        ack(t)
    several = TrackedTuple(None, "c", "default", 0, ["x"], 99.5, ((1, 20, 0x5), (3, 21, 0x6)))
    several.ack_val = 0x30
    ack(several)
    untracked = TrackedTuple(None, "c", "default", 0, ["y"], 99.5, ())
    ack(untracked)
    plain = ("not", "a", "tracked", "tuple")
    ack(plain)
    assert slow == [plain]
    assert m.acked == 6 and m.process_samples == 2 and m.process_ms_total == (0.5 + 3.5) * 1000.0
    bodies = log.drain()
    assert list(ACK_RECORD.iter_unpack(bodies[1])) == [(ACK_ACK, 10, 0x1 ^ 0x2 ^ 0x4), (ACK_ACK, 11, 0x8 ^ 0x100),
                                                       (ACK_ACK, 20, 0x5 ^ 0x30)]
    assert list(ACK_RECORD.iter_unpack(bodies[3])) == [(ACK_ACK, 21, 0x6 ^ 0x30)]


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_the_log_acks_a_received_tuple_of_any_roots_and_refuses_anything_else(name):
    mod = _impl(name)
    log = mod.AckLog()
    one = TrackedTuple(None, "c", "default", 0, ["w"], 0.0, mod.Root(1, 10, 0x1, 0x10))
    several = TrackedTuple(None, "c", "default", 0, ["w"], 0.0, ((1, 11, 0x2), (3, 12, 0x4)))
    several.ack_val = 0x20
    for tup in (one, several, TrackedTuple(None, "c", "default", 0, ["w"], 0.0, ())):
        log.ack(tup)
    bodies = log.drain()
    assert list(ACK_RECORD.iter_unpack(bodies[1])) == [(ACK_ACK, 10, 0x1 ^ 0x10), (ACK_ACK, 11, 0x2 ^ 0x20)]
    assert list(ACK_RECORD.iter_unpack(bodies[3])) == [(ACK_ACK, 12, 0x4 ^ 0x20)]
    for bad in (["not", "a", "tuple"], (1, 2, 3)):
        with pytest.raises(TypeError) as e:
            log.ack(bad)
        assert str(e.value) == f"ack: expected a received tuple, found {type(bad).__name__}"
    assert len(log) == 0
