"""The stream manager's routing table: built from a physical plan and a container, nothing else."""

import dataclasses

import pytest

from stream_manager.routing import RoutingTable
from tests.fakes import word_count_plan


def test_local_tasks_and_local_spouts_are_this_containers_own():
    r0, r1 = RoutingTable.build(word_count_plan(), 0), RoutingTable.build(word_count_plan(), 1)
    assert r0.local_tasks == {1, 3} and r0.local_spouts == {1}
    assert r1.local_tasks == {2, 4, 5} and r1.local_spouts == {2}
    assert r1.is_local(4) and not r1.is_local(3)
    assert r1.is_local_spout(2) and not r1.is_local_spout(4)


def test_container_and_component_of_every_task():
    r = RoutingTable.build(word_count_plan(), 0)
    assert dict(r.container_of) == {1: 0, 2: 1, 3: 0, 4: 1, 5: 1}
    assert dict(r.component_of) == {1: "words", 2: "words", 3: "count", 4: "count", 5: "count"}
    assert r.container_for(4) == 1
    assert r.container_for(99) is None  # not in the plan: the forwarder drops and counts it


def test_a_container_the_plan_does_not_use_has_no_local_tasks():
    r = RoutingTable.build(word_count_plan(), 7)
    assert r.local_tasks == frozenset() and r.local_spouts == frozenset()
    assert r.container_for(1) == 0


def test_the_table_cannot_be_changed():
    r = RoutingTable.build(word_count_plan(), 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.local_tasks = frozenset({9})
    with pytest.raises(TypeError):
        r.container_of[9] = 0


def test_an_empty_table_routes_nothing_locally():
    r = RoutingTable(3)
    assert not r.is_local(1) and r.container_for(1) is None and dict(r.component_of) == {}
