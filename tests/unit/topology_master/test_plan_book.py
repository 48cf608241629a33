"""The topology master's rules (plan_book.py), without sockets or a state manager."""

from dataclasses import dataclass

import pytest

from heron_py.planner.model import (
    PhysicalPlan,
    TopologyState,
)
from tests.fakes import plan_book, stmgr_location
from topology_master.plan_book import RunStateChange


@dataclass
class Info:
    task_id: int
    pid: int
    ready: bool






def test_registration_is_refused_by_a_standby_and_for_a_container_not_in_the_plan() -> None:
    book = plan_book()
    assert book.registration_error(0, active=False, pid=42) == (
        "topology master pid 42 is a standby, not the active master")
    assert book.registration_error(2, active=True, pid=42) == (
        "container 2 is not in the packing plan (containers 0..1)")
    assert book.registration_error(-1, active=True, pid=42) is not None
    assert book.registration_error(1, active=True, pid=42) is None


def test_a_plan_is_due_once_every_container_registered_and_versions_count_up() -> None:
    book = plan_book()
    book.register(stmgr_location(1))
    assert not book.complete
    book.register(stmgr_location(0))
    assert book.complete
    p1 = book.next_plan()
    assert (p1.version, p1.state, [s.container for s in p1.stmgrs]) == (1, TopologyState.RUNNING, [0, 1])
    book.register(stmgr_location(1, port=8000))  # restarted with a new port: replaces the old location
    p2 = book.next_plan()
    assert p2.version == 2 and p2.stmgrs[1].port == 8001 and book.pplan is p2


def test_instances_every_task_of_a_container_and_lost_ones_not_ready() -> None:
    book = plan_book()
    tasks0 = [t.task_id for t in book.packing.tasks_in(0)]
    book.update_instances(0, [Info(tasks0[0], 555, True)])
    assert book.instances[tasks0[0]] == {"component": book.packing.tasks_in(0)[0].component, "container": 0,
                                          "pid": 555, "ready": True}
    assert all(not book.instances[t]["ready"] and book.instances[t]["pid"] == 0 for t in tasks0[1:])
    book.register(stmgr_location(0))
    book.lost(0)
    assert 0 not in book.stmgrs and not book.instances[tasks0[0]]["ready"]


def test_a_master_that_took_over_continues_the_stored_plan() -> None:
    book = plan_book()
    stored = PhysicalPlan(book.topology, book.packing, (), TopologyState.PAUSED, 7)
    book.adopt(stored)
    assert (book.version, book.run_state) == (7, TopologyState.PAUSED)
    book.adopt(PhysicalPlan(book.topology, book.packing, (), TopologyState.RUNNING, 3))  # older: ignored
    book.adopt(None)  # nothing stored
    assert (book.version, book.run_state) == (7, TopologyState.PAUSED)
    book.register(stmgr_location(0))
    book.register(stmgr_location(1))
    assert book.next_plan().version == 8


def test_run_state_change_pushes_a_plan_only_when_one_was_pushed_and_all_are_there() -> None:
    book = plan_book()
    assert book.set_run_state(TopologyState.RUNNING) == RunStateChange("topology 't' is already RUNNING",
                                                                       False, False)
    assert book.set_run_state(TopologyState.PAUSED) == RunStateChange("topology 't' is now PAUSED", True, False)
    book.register(stmgr_location(0))
    book.register(stmgr_location(1))
    assert book.next_plan().state is TopologyState.PAUSED  # the first plan carries the state
    assert book.set_run_state(TopologyState.RUNNING) == RunStateChange("topology 't' is now RUNNING", True, True)
    book.lost(1)
    assert book.set_run_state(TopologyState.PAUSED).push_plan is False


def test_status_sums_the_masters_and_the_stream_managers_counts() -> None:
    book = plan_book()
    book.register(stmgr_location(0))
    book.stmgr_metrics[0] = {"auth_failures": "2", "bad_frames": 1}
    doc = book.status(tmanager={"pid": 1}, auth_failures=1, bad_frames=0, metricsmgrs={"0": {}})
    assert doc == {"topology": "t", "state": "RUNNING", "pplan_version": 0, "tmanager": {"pid": 1},
                   "applied_state": None, "pending_reason": "the stream manager of container 1 is not registered; "
                                                            "the plan goes out when it registers",
                   "stmgrs": {"0": stmgr_location(0).to_dict()}, "instances": {}, "auth_failures": 3, "bad_frames": 1,
                   "stmgr_metrics": {"0": {"auth_failures": "2", "bad_frames": 1}}, "metricsmgrs": {"0": {}}}


@pytest.mark.parametrize("containers", [1, 3])
def test_complete_follows_the_packing(containers: int) -> None:
    book = plan_book(containers)
    for c in range(containers):
        assert not book.complete
        book.register(stmgr_location(c))
    assert book.complete
