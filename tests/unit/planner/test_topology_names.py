"""Topology names refused because they would be hidden files or read as options: by the
planner, the state manager and submit, each with one error line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from heron_py.api.topology import TopologyBuilder
from heron_py.cli.main import main
from heron_py.planner.errors import TopologyError
from heron_py.planner.logical import check_topology_name
from heron_py.state import LocalFsStateManager
from tests.conftest import EXAMPLES

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
