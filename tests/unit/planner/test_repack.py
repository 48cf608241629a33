"""A live rescale's packing (packing.repack): kept tasks never move, new ids ascend, load spreads."""

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heron_py.planner.errors import TopologyError
from heron_py.planner.model import TopologyDef
from heron_py.planner.packing import moved_tasks, repack, round_robin
from tests.unit.planner.test_packing import topo


def resized(t: TopologyDef, pars: list[int]) -> TopologyDef:
    return replace(t, components=tuple(replace(c, par=p) for c, p in zip(t.components, pars, strict=True)))


def test_growing_one_component_adds_ids_above_every_old_one_on_the_least_loaded_containers() -> None:
    old = round_robin(topo([1, 2, 2]), 4)  # c0:1 c1:2,3 c2:4,5 on containers 0,1,2,3,0
    new = repack(old, resized(topo([1, 2, 2]), [1, 2, 4]))
    assert [(t.task_id, t.component, t.component_index, t.container) for t in new.tasks] == [
        (1, "c0", 0, 0), (2, "c1", 0, 1), (3, "c1", 1, 2), (4, "c2", 0, 3), (5, "c2", 1, 0),
        (6, "c2", 2, 1), (7, "c2", 3, 2)]
    assert moved_tasks(old, new) == ({6, 7}, set())


def test_shrinking_drops_the_highest_indexes_and_leaves_the_ids_with_a_gap() -> None:
    old = round_robin(topo([1, 3, 2]), 3)
    new = repack(old, resized(topo([1, 3, 2]), [1, 1, 2]))
    assert [t.task_id for t in new.tasks] == [1, 2, 5, 6]
    assert moved_tasks(old, new) == (set(), {3, 4})
    regrown = repack(new, resized(topo([1, 3, 2]), [1, 2, 2]))
    assert [t.task_id for t in regrown.tasks] == [1, 2, 5, 6, 7]  # never an id used before
    assert regrown.tasks_of("c1") == (2, 7)


def test_more_containers_than_tasks_is_refused_in_one_line() -> None:
    old = round_robin(topo([2, 2]), 4)
    with pytest.raises(TopologyError) as e:
        repack(old, resized(topo([2, 2]), [1, 2]))
    assert str(e.value) == "topology 't': 4 containers for 3 tasks; expected at most one container per task"


@st.composite
def rescales(draw):
    pars = draw(st.lists(st.integers(1, 6), min_size=1, max_size=5))
    n = draw(st.integers(1, sum(pars)))
    steps = draw(st.lists(st.lists(st.integers(1, 6), min_size=len(pars), max_size=len(pars)), max_size=4))
    return pars, n, [s for s in steps if sum(s) >= n]


@given(rescales())
def test_any_rescales_keep_every_kept_task_in_place(case):
    pars, n, steps = case
    t = topo(pars)
    plan = round_robin(t, n)
    ever = {p.task_id for p in plan.tasks}
    for step in steps:
        new = repack(plan, resized(t, step))
        before = {p.task_id: p for p in plan.tasks}
        for p in new.tasks:
            if p.task_id in before:
                assert before[p.task_id] == p  # id, component, index and container unchanged
            else:
                assert p.task_id > max(ever)  # a new id, never one used before
        counts = Counter(p.component for p in new.tasks)
        for c, par in zip(t.components, step, strict=True):
            assert counts[c.name] == par
            idx = [p.component_index for p in sorted(new.tasks, key=lambda p: p.task_id) if p.component == c.name]
            assert idx == list(range(par))  # ids ascend with indexes: key groups follow the order
        ever |= {p.task_id for p in new.tasks}
        plan = new


def test_a_component_new_to_the_topology_grows_from_index_0_on_the_least_loaded_containers() -> None:
    from heron_py.planner.model import ComponentDef, ComponentKind, PickledRef

    old = round_robin(topo([1, 2]), 2)  # c0:1 (container 0), c1:2,3 (containers 1, 0)
    extra = ComponentDef("c2", ComponentKind.BOLT, PickledRef(b""), "m:C", 2, (), ())
    new = repack(old, replace(topo([1, 2]), components=(*topo([1, 2]).components, extra)))
    assert [(t.task_id, t.component, t.component_index, t.container) for t in new.tasks if t.component == "c2"] == [
        (4, "c2", 0, 1), (5, "c2", 1, 0)]


@pytest.mark.parametrize("n", [0, True, -1, 1.5])
def test_round_robin_refuses_a_number_of_containers_that_is_not_a_whole_number_from_1(n: object) -> None:
    with pytest.raises(TopologyError) as e:
        round_robin(topo([2]), n)  # type: ignore[arg-type]
    assert str(e.value) == f"topology 't': number of containers must be an integer >= 1, found {n!r}"


def test_round_robin_refuses_more_containers_than_tasks_in_one_line() -> None:
    with pytest.raises(TopologyError) as e:
        round_robin(topo([1, 2]), 4)
    assert str(e.value) == "topology 't': 4 containers for 3 tasks; expected at most one container per task"
