"""Atomic writes (heron_py.common.atomic) of state documents and restarts.json, and the
topology names refused because they would be hidden or point outside their folder."""

from __future__ import annotations

import json
import os
import types
from pathlib import Path

import pytest

from heron_py.api.topology import TopologyBuilder
from heron_py.cli.main import main
from heron_py.common.atomic import atomic_write_bytes
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import check_topology_name
from heron_py.scheduler.executor import Executor
from heron_py.state import LocalFsStateManager
from tests.conftest import EXAMPLES


def _fail_fsync(monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash between creating the temporary file and renaming it over the target."""

    def boom(fd: int) -> None:
        raise OSError(5, "simulated crash mid-write")

    monkeypatch.setattr(os, "fsync", boom)


def test_a_crash_mid_write_leaves_the_old_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "doc.json"
    atomic_write_bytes(target, b"old")
    _fail_fsync(monkeypatch)
    with pytest.raises(OSError, match="simulated crash mid-write"):
        atomic_write_bytes(target, b"new, and longer than the old")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc.json"]  # no temporary file left


def test_a_private_file_is_private_from_the_first_byte(tmp_path: Path) -> None:
    target = tmp_path / "secret"
    atomic_write_bytes(target, b"s3cr3t", mode=0o600)
    assert (target.stat().st_mode & 0o777, target.read_bytes()) == (0o600, b"s3cr3t")


def test_localfs_state_survives_a_crash_mid_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    state = LocalFsStateManager(tmp_path)
    state.set_secret("wc", b"old secret")
    _fail_fsync(monkeypatch)
    with pytest.raises(OSError, match="simulated crash mid-write"):
        state.set_secret("wc", b"new secret")
    monkeypatch.undo()
    assert state.get_secret("wc") == b"old secret"
    assert sorted(p.name for p in (tmp_path / "state" / "secrets").iterdir()) == ["wc"]


def test_restarts_json_survives_a_crash_mid_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "container-0"
    folder.mkdir()
    paths = types.SimpleNamespace(container=lambda k: tmp_path / f"container-{k}")
    ex = types.SimpleNamespace(container=0, paths=paths, children=[types.SimpleNamespace(name="stmgr", restarts=1)])
    Executor._write_restarts(ex)  # type: ignore[arg-type]
    assert json.loads((folder / "restarts.json").read_text()) == {"stmgr": 1}
    ex.children[0].restarts = 2
    _fail_fsync(monkeypatch)
    with pytest.raises(OSError, match="simulated crash mid-write"):
        Executor._write_restarts(ex)  # type: ignore[arg-type]
    assert json.loads((folder / "restarts.json").read_text()) == {"stmgr": 1}
    assert sorted(p.name for p in folder.iterdir()) == ["restarts.json"]


DOT_ERROR = ("topology name {!r} is not valid: it starts with '.'; expected a name that starts with a letter, "
             "digit or '_'")


@pytest.mark.parametrize("name", [".hidden", ".", ".."])
def test_names_starting_with_a_dot_are_refused(name: str, tmp_path: Path) -> None:
    with pytest.raises(TopologyError) as e:
        check_topology_name(name)
    assert str(e.value) == DOT_ERROR.format(name)
    with pytest.raises(TopologyError) as e:  # an option to every command the page runs with it
        check_topology_name("-" + name.lstrip("."))
    assert str(e.value) == DOT_ERROR.replace("'.'", "'-'").format("-" + name.lstrip("."))
    with pytest.raises(TopologyError) as e:
        TopologyBuilder(name)
    assert str(e.value) == DOT_ERROR.format(name)
    # the state manager refuses it the same way: the name is a file name there
    with pytest.raises(TopologyError) as e:
        LocalFsStateManager(tmp_path).get_topology(name)
    assert str(e.value) == DOT_ERROR.format(name)
    check_topology_name("a.b-c_d")  # a dot inside a name is fine


@pytest.mark.parametrize("name", [".hidden", ".", ".."])
def test_submit_refuses_a_name_starting_with_a_dot(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HERON_PY_HOME", str(home))
    monkeypatch.delenv("HERON_PY_STATE_MANAGER", raising=False)
    code = main(["submit", "local", "--name", name, "--wait", "5", str(EXAMPLES / "word_count.py")])
    assert (code, capsys.readouterr().err) == (1, f"heron-py: error: {DOT_ERROR.format(name)}\n")
    # nothing stored, nothing launched, and no folder outside topologies/ touched
    assert sorted(os.listdir(home)) == []


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
