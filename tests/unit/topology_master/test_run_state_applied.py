"""Activate/deactivate say whether the state is in effect on every stream manager or pending
(and why), and the CLI fails when it is not applied within --wait (issue 18, defect 9)."""

import json

from heron_py.cli.admin import AdminError, run_state_command
from heron_py.planner.model import TopologyState
from proto import heron_py_pb2 as pb
from tests.fakes import ManualClock, plan_book, stmgr_location
from topology_master.admin import AdminCommands

PENDING = "the stream manager of container 1 is not registered; the plan goes out when it registers"


class _Master:
    """The admin view of a master over a real PlanBook (what main.py does, without sockets)."""

    active = True

    def __init__(self, book, store_fails=None):
        self.book = book
        self.store_fails = store_fails

    def set_run_state(self, state):
        change = self.book.set_run_state(state)
        if change.push_plan:
            self._push()
        return change.message

    def _push(self):
        plan = self.book.next_plan()
        if self.store_fails:
            self.book.plan_store_failed(plan.version, self.store_fails)
        else:
            self.book.plan_stored(plan.version)  # main.py: the state manager's write went through

    def status(self):
        return self.book.status(tmanager={}, auth_failures=0, bad_frames=0, metricsmgrs={})


def test_deactivate_with_a_stream_manager_unregistered_is_reported_pending_with_the_reason():
    book = plan_book(2)
    book.register(stmgr_location(0))
    resp = AdminCommands(_Master(book), pid=1).handle("deactivate")
    assert resp.ok and resp.message == f"topology 't' is now PAUSED; pending: {PENDING}"
    doc = json.loads(resp.status_json)
    assert (doc["state"], doc["applied_state"], doc["pending_reason"]) == ("PAUSED", None, PENDING)


def test_with_every_stream_manager_registered_it_is_applied():
    book = plan_book(2)
    book.register(stmgr_location(0))
    book.register(stmgr_location(1))
    book.plan_stored(book.next_plan().version)
    resp = AdminCommands(_Master(book), pid=1).handle("deactivate")
    assert resp.message == "topology 't' is now PAUSED; applied on every stream manager"
    assert json.loads(resp.status_json)["applied_state"] == "PAUSED"


def test_a_state_whose_plan_write_failed_is_pending_and_says_why():
    """A deactivate pushed to the stream managers but not stored would be undone by a master
    taking over (it adopts the stored plan's state): it is not reported applied."""
    book = plan_book(2)
    book.register(stmgr_location(0))
    book.register(stmgr_location(1))
    book.plan_stored(book.next_plan().version)
    resp = AdminCommands(_Master(book, store_fails="ConnectionLoss"), pid=1).handle("deactivate")
    reason = ("plan v2 carrying it is not in the state manager yet (its write failed: ConnectionLoss); a master "
              "taking over would not keep it")
    assert resp.message == f"topology 't' is now PAUSED; pending: {reason}"
    assert json.loads(resp.status_json)["pending_reason"] == reason
    # the write is retried with the next plan; once stored, it is in effect
    book.plan_stored(book.next_plan().version)
    assert book.pending_reason() is None


def test_a_master_taking_over_counts_the_stored_plan_as_stored():
    book = plan_book(2)
    stored = plan_book(2)
    stored.register(stmgr_location(0))
    stored.register(stmgr_location(1))
    stored.run_state = TopologyState.PAUSED
    plan = stored.next_plan()
    book.adopt(plan, epoch=2)
    assert (book.run_state, book.stored_version) == (TopologyState.PAUSED, plan.version)




def _sender(book, register_after_polls=None):
    master = AdminCommands(_Master(book), pid=1)
    polls = [0]

    def send(state, name, command):
        if command == "status":
            polls[0] += 1
            if polls[0] == 2:
                raise AdminError("topology master not reachable")  # a failover: asked again
            if register_after_polls is not None and polls[0] >= register_after_polls and 1 not in book.stmgrs:
                book.register(stmgr_location(1))
                book.plan_stored(book.next_plan().version)  # what the master does when the last one registers
        return master.handle(command)

    return send


def test_the_cli_fails_with_the_reason_when_not_applied_within_wait():
    book = plan_book(2)
    book.register(stmgr_location(0))
    clock = ManualClock(0.0)
    ok, text = run_state_command(None, "t", "deactivate", 2.0, send=_sender(book), clock=clock, sleep=clock.sleep)
    assert not ok
    assert text == (f"topology 't' is now PAUSED; pending: {PENDING}\n"
                    f"deactivate of topology 't' not applied within 2 s: {PENDING}")


def test_the_cli_waits_until_the_state_is_applied():
    book = plan_book(2)
    book.register(stmgr_location(0))
    clock = ManualClock(0.0)
    ok, text = run_state_command(None, "t", "deactivate", 10.0, send=_sender(book, register_after_polls=3),
                                 clock=clock, sleep=clock.sleep)
    assert ok and text.endswith("\ndeactivate of topology 't' applied on every stream manager")
    assert clock.t == 1.5


def test_a_refused_command_fails_at_once():
    def send(state, name, command):
        return pb.AdminResponse(ok=False, message="topology master pid 9 is a standby")

    assert run_state_command(None, "t", "activate", 5.0, send=send) == (False, "topology master pid 9 is a standby")
    assert plan_book().set_run_state(TopologyState.RUNNING).changed is False
