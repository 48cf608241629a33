"""Routing properties of every grouping kind (pure), and the stable hash."""

import random
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heron_py.api.stream import Grouping
from heron_py.common.stable_hash import stable_hash
from heron_py.planner.errors import TopologyError
from heron_py.planner.grouping import RoutingError, check_direct, make_router
from heron_py.planner.model import GroupingDef, GroupingKind

TARGETS = (4, 7, 9, 12)
values = st.one_of(st.text(max_size=12), st.integers(), st.binary(max_size=8), st.floats(allow_nan=False))


def router(g, local=frozenset(), idx=(0,), custom=None):
    return make_router(g, target_tasks=TARGETS, local_tasks=local, field_indices=idx, custom=custom,
                       rng=random.Random(1))


@given(st.lists(st.tuples(values, values), min_size=1, max_size=200))
def test_fields_same_key_same_task(rows):
    r1, r2 = router(Grouping.fields("k")), router(Grouping.fields("k"))
    for k, other in rows:
        [t] = r1.choose([k, other])
        assert t in TARGETS
        assert r2.choose([k, "something else"]) == (t,)


def test_fields_reaches_every_target():
    r = router(Grouping.fields("k"))
    assert {r.choose([f"w{i}"])[0] for i in range(200)} == set(TARGETS)


def test_multi_field_grouping_uses_all_selected_fields():
    r = router(Grouping.fields("a", "b"), idx=(0, 2))
    assert r.choose(["x", 1, "y"]) == r.choose(["x", 2, "y"])
    assert len({r.choose(["x", 0, f"y{i}"])[0] for i in range(100)}) > 1


def test_stable_hash_does_not_depend_on_pythonhashseed():
    code = "from heron_py.common.stable_hash import stable_hash; print(stable_hash(['word', 42, b'x', 1.5, None]))"
    outs = {subprocess.run([sys.executable, "-c", code], env={"PYTHONHASHSEED": seed, "PATH": ""},
                           capture_output=True, text=True, check=True).stdout for seed in ("1", "2", "999")}
    assert outs == {f"{stable_hash(['word', 42, b'x', 1.5, None])}\n"}
    assert stable_hash([1]) == stable_hash([True]) == stable_hash([1.0])


@pytest.mark.parametrize("g", [Grouping.SHUFFLE, Grouping.NONE])
def test_shuffle_and_none_spread_evenly(g):
    r = router(g)
    c = Counter(r.choose(["x"])[0] for _ in range(400))
    assert c == {t: 100 for t in TARGETS}


def test_all_and_lowest():
    assert tuple(router(Grouping.ALL).choose(["x"])) == TARGETS
    assert tuple(router(Grouping.LOWEST).choose(["x"])) == (4,)


def test_local_or_shuffle_prefers_local_targets():
    r = router(Grouping.LOCAL_OR_SHUFFLE, local=frozenset({7, 12, 99}))
    assert {r.choose(["x"])[0] for _ in range(50)} == {7, 12}
    r = router(Grouping.LOCAL_OR_SHUFFLE, local=frozenset({99}))
    assert {r.choose(["x"])[0] for _ in range(50)} == set(TARGETS)


@given(st.lists(st.text(max_size=5), min_size=1, max_size=300))
def test_partial_key_picks_one_of_two_candidates(keys):
    r = router(Grouping.partial_key("k"))
    seen: dict[str, set[int]] = {}
    for k in keys:
        [t] = r.choose([k])
        seen.setdefault(k, set()).add(t)
    assert all(len(ts) <= 2 for ts in seen.values())


class EvenOdd:
    def choose_tasks(self, values):
        return [4] if values[0] % 2 == 0 else [12]


class Bad:
    def choose_tasks(self, values):
        return [5]


def test_custom_grouping_and_its_validation():
    g = GroupingDef(GroupingKind.CUSTOM)
    assert router(g, custom=EvenOdd()).choose([3]) == [12]
    with pytest.raises(RoutingError) as e:
        router(g, custom=Bad()).choose([3])
    assert str(e.value) == "custom grouping Bad chose task 5, which is not one of the subscribed tasks [4, 7, 9, 12]"


def test_direct_checks_the_task():
    check_direct(7, TARGETS)
    with pytest.raises(RoutingError) as e:
        check_direct(8, TARGETS)
    assert str(e.value) == "direct emit to task 8, which is not one of the subscribed tasks [4, 7, 9, 12]"


@given(st.lists(values, min_size=0, max_size=4))
def test_stable_hash_is_a_32_bit_function_of_the_values(vals):
    h = stable_hash(vals)
    assert 0 <= h < 2**32
    assert stable_hash(list(vals)) == stable_hash(tuple(vals)) == h


@given(values)
def test_one_field_hashes_like_the_value(v):
    from heron_py.common.stable_hash import value_hash

    assert stable_hash([v]) == value_hash(v)


def test_equal_numbers_hash_alike_and_str_is_not_int():
    assert stable_hash([2]) == stable_hash([2.0]) == stable_hash([True + True])
    assert stable_hash(["a", 1]) != stable_hash([1, "a"])


@given(st.lists(st.text(max_size=6), min_size=1, max_size=200), st.integers(1, 9))
def test_fields_is_a_pure_function_of_the_key_and_target_set(keys, n):
    targets = list(range(10, 10 + n))
    fwd = make_router(Grouping.fields("k"), target_tasks=targets, local_tasks=frozenset(), field_indices=(0,))
    rev = make_router(Grouping.fields("k"), target_tasks=targets[::-1], local_tasks=frozenset(),
                      field_indices=(0,), rng=random.Random(7))
    for k in keys:
        assert fwd.choose([k]) == rev.choose([k])


@given(st.lists(st.text(max_size=5), min_size=1, max_size=300), st.integers(2, 8))
def test_partial_key_has_two_distinct_candidates_and_uses_only_them(keys, n):
    targets = list(range(1, n + 1))
    r = make_router(Grouping.partial_key("k"), target_tasks=targets, local_tasks=frozenset(), field_indices=(0,))
    for k in keys:
        a, b = r.candidates([k])  # type: ignore[attr-defined]
        assert a != b
        [t] = r.choose([k])
        assert t in (targets[a], targets[b])


def test_partial_key_balances_a_hot_key_between_its_two_tasks():
    r = router(Grouping.partial_key("k"))
    c = Counter(r.choose(["hot"])[0] for _ in range(1001))
    assert len(c) == 2 and sorted(c.values()) == [500, 501]


def test_partial_key_with_one_target():
    r = make_router(Grouping.partial_key("k"), target_tasks=[3], local_tasks=frozenset(), field_indices=(0,))
    assert r.choose(["x"]) == (3,)


def test_all_returns_the_same_object_every_time():
    r = router(Grouping.ALL)
    assert r.choose(["a"]) is r.choose(["b"])


def test_direct_and_empty_targets_have_no_router():
    with pytest.raises(TopologyError) as e:
        router(Grouping.DIRECT)
    assert str(e.value) == ("grouping 'direct' has no router: a direct stream's tuples go to the task the emitter "
                            "names with direct_task, checked by check_direct()")
    with pytest.raises(TopologyError):
        make_router(Grouping.SHUFFLE, target_tasks=[], local_tasks=frozenset(), field_indices=())


def test_shuffle_start_depends_on_the_rng_only():
    a = [router(Grouping.SHUFFLE).choose(["x"])[0] for _ in range(3)]
    b = [router(Grouping.SHUFFLE).choose(["x"])[0] for _ in range(3)]
    assert a == b
