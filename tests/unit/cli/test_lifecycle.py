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


class _Sched:
    kind = "local"

    def __init__(self) -> None:
        self.changed = 0

    def packing_changed(self, name: str) -> None:
        self.changed += 1


def _refusing_master(monkeypatch: pytest.MonkeyPatch, meanwhile=lambda: None) -> None:
    """A master that refuses the rescale (one is under way); ``meanwhile`` runs while it is asked."""
    from heron_py.cli import admin
    from proto import heron_py_pb2 as pb

    def refuse(state, name, command, timeout=10.0):
        meanwhile()
        return pb.AdminResponse(ok=False, message="rescale: a rescale is already under way (staging); wait for it")

    monkeypatch.setattr(admin, "admin_command", refuse)


def _word_count(tmp_path):
    from heron_py.api.stream import Grouping
    from heron_py.api.topology import TopologyBuilder
    from heron_py.planner.packing import round_robin
    from heron_py.state.localfs import LocalFsStateManager
    from tests.fakes import Counter, WordSpout

    b = TopologyBuilder("wc")
    spout = b.add_spout("words", WordSpout, par=1)
    b.add_bolt("count", Counter, par=2, inputs={spout: Grouping.fields("word")})
    topo = b.build()
    state = LocalFsStateManager(tmp_path)
    state.set_topology(topo)
    state.set_packing_plan("wc", round_robin(topo, 2))
    return state, topo


def test_a_refused_update_puts_back_the_documents_it_replaced(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from heron_py.cli.lifecycle import update_topology
    from heron_py.cli.submit import SubmitError

    state, _topo = _word_count(tmp_path)
    packing = state.get_packing_plan("wc")
    _refusing_master(monkeypatch)
    sched = _Sched()
    with pytest.raises(SubmitError) as e:
        update_topology(state, sched, "wc", {"count": 3}, wait_s=1)  # type: ignore[arg-type]
    assert str(e.value) == ("update: topology 'wc': rescale: a rescale is already under way (staging); wait for "
                            "it")
    assert state.get_packing_plan("wc") == packing and state.get_topology("wc").component("count").par == 2
    assert sched.changed == 2  # the new packing, then the old one back


def test_a_refused_update_leaves_documents_another_update_wrote_since(tmp_path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Two updates at once: while this one waits for the master, another (the one the master
    took) writes its definition and packing; this one's refusal must not put back what it read
    before, which would undo the other's."""
    from dataclasses import replace

    from heron_py.cli.lifecycle import update_topology
    from heron_py.cli.submit import SubmitError
    from heron_py.planner.packing import repack

    state, topo = _word_count(tmp_path)
    packing = state.get_packing_plan("wc")
    other_topo = replace(topo, components=tuple(replace(c, par=4) if c.name == "count" else c
                                                for c in topo.components))
    other_packing = repack(packing, other_topo)

    def other_update() -> None:
        state.set_topology(other_topo)
        state.set_packing_plan("wc", other_packing)

    _refusing_master(monkeypatch, other_update)
    sched = _Sched()
    with pytest.raises(SubmitError):
        update_topology(state, sched, "wc", {"count": 3}, wait_s=1)  # type: ignore[arg-type]
    assert state.get_packing_plan("wc") == other_packing
    assert state.get_topology("wc").component("count").par == 4
    assert sched.changed == 1  # its own write only
