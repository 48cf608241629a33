"""The tracker's root tables (heron_py.acking.roots): the Python reference and its typed twin
(roots.pyx, compiled in its place) give the same results, record for record, over random
streams of records, fails, rotations and generation changes; and both refuse a body that is not
whole records, verbatim, applying none of it."""

from __future__ import annotations

import random
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heron_py.common.framing import ACK_ACK, ACK_FAIL, ACK_INIT, ACK_RECORD, RESULT_RECORD
from tests.unit.runtime import twins

MODULE = "heron_py.acking.roots"


def _reference() -> ModuleType:
    return twins.reference(MODULE)


def _typed() -> ModuleType:
    return twins.typed(MODULE)


IMPLEMENTATIONS = ["reference", "typed"]


def _impl(name: str) -> ModuleType:
    return twins.implementation(MODULE, name)


def _body(*records: tuple[int, int, int]) -> bytes:
    return b"".join(ACK_RECORD.pack(*r) for r in records)


def _state(t: Any) -> tuple[Any, ...]:
    return (t.buckets, t.live, [t.live_in(b) for b in range(t.buckets)], sorted(t.roots()), sorted(t.resolved()))


def _ops(rng: random.Random, n: int) -> list[tuple[Any, ...]]:
    """Random operations over a few hundred roots (so records meet live, resolved and unknown
    roots alike), roots 0 and 2**64-1 among them, values built to reach zero."""
    roots = [0, 2**64 - 1] + [rng.getrandbits(64) for _ in range(rng.randint(1, 300))]
    xors: dict[int, list[int]] = {}
    ops: list[tuple[Any, ...]] = []
    for _ in range(n):
        p = rng.random()
        if p < 0.8:
            recs = []
            for _ in range(rng.randint(0, 40)):
                root = rng.choice(roots)
                q = rng.random()
                if q < 0.45:  # a new key into the root's tree
                    k = rng.getrandbits(64) if rng.random() < 0.95 else 0
                    xors.setdefault(root, []).append(k)
                    recs.append((rng.choice((ACK_INIT, ACK_ACK)), root, k))
                elif q < 0.9 and xors.get(root):  # a key out of it again
                    k = xors[root].pop(rng.randrange(len(xors[root])))
                    recs.append((ACK_ACK, root, k))
                elif q < 0.97:
                    recs.append((ACK_FAIL, root, 0))
                else:
                    recs.append((rng.choice((0, 4, 255)), root, rng.getrandbits(64)))
            ops.append(("apply", _body(*recs)))
        elif p < 0.86:
            ops.append(("fail", rng.choice(roots)))
        elif p < 0.93:
            ops.append(("rotate",))
        elif p < 0.97:
            ops.append(("grow",))
        else:
            ops.append(("shrink",))
    return ops


def _run(mod: ModuleType, buckets: int, ops: list[tuple[Any, ...]]) -> list[Any]:
    t = mod.RootTable(buckets)
    out: list[Any] = []
    for op in ops:
        if op[0] == "apply":
            results = bytearray(b"head")
            unknown = t.apply(memoryview(op[1]), results)
            assert results[:4] == b"head"
            out.append((list(RESULT_RECORD.iter_unpack(results[4:])), unknown))
        elif op[0] == "fail":
            out.append(t.fail(op[1]))
        elif op[0] in ("rotate", "shrink"):
            try:
                out.append(sorted(getattr(t, op[0])()))  # the order of a generation's roots is not kept
            except ValueError as e:
                out.append(str(e))
        else:
            t.grow()
        out.append(_state(t))
    return out


@settings(max_examples=120, deadline=None)
@given(st.integers(min_value=0, max_value=2**32), st.integers(min_value=2, max_value=4))
def test_the_typed_table_matches_the_reference_step_for_step(seed, buckets):
    typed = _typed()
    ops = _ops(random.Random(seed), 60)
    assert _run(typed, buckets, ops) == _run(_reference(), buckets, ops)


def test_the_typed_table_matches_the_reference_through_growth_and_rotation():
    """A hundred thousand roots (the table resized many times, long probe runs deleted from in
    every order), then rotations dropping them."""
    typed, ref = _typed(), _reference()
    rng = random.Random(7)
    roots = [rng.getrandbits(64) for _ in range(100_000)]
    inits = _body(*((ACK_INIT, r, r ^ 0x5555) for r in roots))
    half = roots[::2]
    rng.shuffle(half)
    acks = _body(*((ACK_ACK, r, r ^ 0x5555) for r in half))
    outs = []
    for mod in (typed, ref):
        t = mod.RootTable(3)
        res = bytearray()
        assert t.apply(inits, res) == [] and res == b""
        t.rotate()
        assert t.apply(acks, res) == []
        outs.append((bytes(res), t.live, sorted(t.rotate()), sorted(t.rotate()), t.live, sorted(t.resolved())))
    assert outs[0] == outs[1]
    assert outs[0][1] == 50_000 and outs[0][4] == 0 and len(outs[0][3]) == 50_000


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_a_body_that_is_not_whole_records_is_refused_whole(name):
    mod = _impl(name)
    t = mod.RootTable(3)
    results = bytearray()
    body = _body((ACK_INIT, 5, 0xA), (ACK_ACK, 5, 0xA)) + b"\x02\x00"
    with pytest.raises(ValueError) as e:
        t.apply(body, results)
    assert str(e.value) == ("ACK_BATCH body: expected a multiple of 17 bytes (kind, root id, value per record), "
                            "found 36 bytes; no record of it was applied")
    assert results == b"" and t.live == 0 and t.resolved() == []


@pytest.mark.parametrize("name", IMPLEMENTATIONS)
def test_generations_age_roots_out_and_remember_them(name):
    t = _impl(name).RootTable(2)
    results = bytearray()
    t.apply(_body((ACK_INIT, 1, 0xA)), results)
    t.grow()
    t.apply(_body((ACK_INIT, 2, 0xB)), results)
    assert [t.live_in(b) for b in range(3)] == [1, 1, 0]
    assert t.shrink() == [] and t.buckets == 2  # the empty oldest generation
    assert t.rotate() == [1] and t.resolved() == [1] and t.roots() == [2]
    t.apply(_body((ACK_ACK, 1, 0xA), (ACK_INIT, 1, 0xC)), results)  # late records of a timed-out root
    assert results == b"" and t.live == 1
    assert t.fail(1) is False and t.fail(2) is True and t.fail(2) is False
    assert t.live == 0 and sorted(t.resolved()) == [1, 2]
    assert t.rotate() == [] and t.rotate() == [] and t.resolved() == []  # remembered for a generation's life
    with pytest.raises(ValueError) as e:
        t.shrink()
    assert str(e.value) == "rotating map keeps at least 2 buckets: cannot drop one of 2"
