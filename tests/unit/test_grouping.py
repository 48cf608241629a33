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


def test_partial_key_splits_a_hot_key():
    r = router(Grouping.partial_key("k"))
    c = Counter(r.choose(["hot"])[0] for _ in range(1000))
    assert len(c) == 2 or len(set(r.candidates(["hot"]))) == 1  # type: ignore[attr-defined]
    if len(c) == 2:
        a, b = c.values()
        assert abs(a - b) <= 1


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
