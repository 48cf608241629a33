"""The CLI's lifecycle commands (heron_py/cli/lifecycle.py): a scheduler's error is one clear message."""

from __future__ import annotations

import types

import pytest


def test_a_permission_error_in_restart_is_one_clear_message() -> None:
    from typing import Any

    from heron_py.cli.lifecycle import restart_topology
    from heron_py.cli.submit import SubmitError

    class Denied:
        kind = "local"

        def restart(self, name: str, containers: list[int], num_containers: int) -> None:
            raise PermissionError(13, "Permission denied", "/proc/4242/environ")

    class State:
        def get_packing_plan(self, name: str) -> Any:
            return types.SimpleNamespace(num_containers=2, tasks=[])

        def get_execution_state(self, name: str) -> dict[str, Any]:
            return {}

    with pytest.raises(SubmitError) as e:
        restart_topology(State(), Denied(), "wc", 1)  # type: ignore[arg-type]
    assert str(e.value) == ("restart: topology 'wc' on the local scheduler: permission denied on /proc/4242/environ "
                            "while restarting containers [1]; expected access as the user who submitted the "
                            "topology, found: Permission denied")
