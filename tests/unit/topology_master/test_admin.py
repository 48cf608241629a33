"""Admin commands (topology_master/admin.py) against a fake of the master's control view."""

import json
from typing import Any

from heron_py.planner.model import TopologyState
from topology_master.admin import AdminCommands


class FakeMasterControl:
    """The master as the admin commands see it (``MasterControl``); it records the run states set.
    (The HTTP API's view of the master: tests/fakes.py ``FakeApiMaster``.)"""

    def __init__(self, active: bool) -> None:
        self.active = active
        self.states: list[TopologyState] = []

    def set_run_state(self, state: TopologyState) -> str:
        self.states.append(state)
        return f"now {state.value}"

    def status(self) -> dict[str, Any]:
        return {"state": "RUNNING"}

    def restore(self, checkpoint_id: int | None) -> tuple[bool, str]:
        return False, "not effectively once"


def test_activate_deactivate_status_on_the_active_master() -> None:
    m = FakeMasterControl(active=True)
    admin = AdminCommands(m, pid=9)
    resp = admin.handle("deactivate")
    assert (resp.ok, resp.message) == (True, "now PAUSED; applied on every stream manager")
    assert admin.handle("activate").message == "now RUNNING; applied on every stream manager"
    assert m.states == [TopologyState.PAUSED, TopologyState.RUNNING]
    resp = admin.handle("status")
    assert resp.ok and json.loads(resp.status_json) == {"state": "RUNNING"}


def test_a_standby_answers_status_only() -> None:
    m = FakeMasterControl(active=False)
    admin = AdminCommands(m, pid=9)
    resp = admin.handle("activate")
    assert (resp.ok, resp.message) == (False, "topology master pid 9 is a standby; send activate to the active "
                                              "master (its location is in the state manager)")
    assert m.states == [] and admin.handle("status").ok


def test_unknown_command() -> None:
    resp = AdminCommands(FakeMasterControl(active=True), pid=9).handle("explode")
    assert (resp.ok, resp.message) == (False, "unknown admin command 'explode'; expected one of activate, "
                                              "deactivate, status")
