"""Key groups (heron_py/planner/keygroups.py): the ranges a task owns, the default number of
groups, and the fields grouping's agreement with them."""

from __future__ import annotations

import pytest

from heron_py.api.stream import Grouping
from heron_py.common.config import ConfigError
from heron_py.planner.errors import TopologyError
from heron_py.planner.grouping import FieldsRouter, make_router
from heron_py.planner.keygroups import (
    default_max_parallelism,
    key_group,
    max_parallelism,
    owned_groups,
    owner_index,
)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 64, 127, 128])
@pytest.mark.parametrize("m", [128, 130])
def test_every_group_has_exactly_one_owner_and_ranges_are_contiguous(n: int, m: int) -> None:
    seen: list[int] = []
    for i in range(n):
        r = owned_groups(i, n, m)
        assert all(owner_index(g, n, m) == i for g in r)
        seen.extend(r)
    assert seen == list(range(m))  # in order: index i's range comes before index i+1's
    sizes = [len(owned_groups(i, n, m)) for i in range(n)]
    assert max(sizes) - min(sizes) <= 1  # as even as whole groups allow


def test_default_max_parallelism_is_flinks_rule() -> None:
    assert default_max_parallelism(1) == 128
    assert default_max_parallelism(85) == 128  # 127 -> 128
    assert default_max_parallelism(86) == 256  # 129 -> 256
    assert default_max_parallelism(200) == 512  # 300 -> 512
    assert default_max_parallelism(30000) == 32768  # capped
    assert default_max_parallelism(40000) == 40000  # never below the parallelism


def test_max_parallelism_reads_the_component_over_the_topology() -> None:
    key = "topology.component.max.parallelism"
    assert max_parallelism({}, {}, 4) == 128
    assert max_parallelism({key: 16}, {}, 4) == 16
    assert max_parallelism({key: 16}, {key: "32"}, 4) == 32
    with pytest.raises(ConfigError) as e:
        max_parallelism({}, {key: 0}, 4)
    assert str(e.value) == "config topology.component.max.parallelism: expected an integer >= 1, found 0"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7])
def test_the_fields_grouping_sends_a_key_to_the_owner_of_its_group(n: int) -> None:
    targets = [10 + 3 * i for i in range(n)]
    router = make_router(Grouping.fields("k"), target_tasks=targets[::-1], local_tasks=frozenset(),
                         field_indices=(0,), max_par=64)
    two = make_router(Grouping.fields("k", "j"), target_tasks=targets, local_tasks=frozenset(),
                      field_indices=(0, 1), max_par=64)
    for key in ["a", "word", 17, 2.5, None, b"x", ("t", 1)]:
        want = targets[owner_index(key_group(key, 64), n, 64)]
        assert router.choose([key]) == (want,)
        assert router.choose([key]) == (want,)  # the cached answer agrees
        pair = targets[owner_index(key_group((key, "z"), 64), n, 64)]
        assert two.choose([key, "z"]) == (pair,)  # several fields: a state keyed by their tuple


def test_a_fields_grouping_onto_more_tasks_than_groups_is_refused() -> None:
    with pytest.raises(TopologyError) as e:
        FieldsRouter(list(range(5)), (0,), 4)
    assert str(e.value) == ("fields grouping onto 5 tasks: expected at most topology.component.max.parallelism "
                            "(4) tasks, found 5")


def test_a_rescale_moves_whole_groups_only() -> None:
    """2 -> 3 tasks: a key changes task only if its group changed owner; groups never split."""
    m = 128
    moved = {g for g in range(m) if owner_index(g, 2, m) != owner_index(g, 3, m)}
    assert 0 < len(moved) < m
    for key in (f"k{i}" for i in range(500)):
        g = key_group(key, m)
        assert (owner_index(g, 2, m) != owner_index(g, 3, m)) == (g in moved)
