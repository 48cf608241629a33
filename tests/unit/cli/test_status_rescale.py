"""``heron-py status`` during a live rescale: the master's execution state names its phase and
the tasks it adds and removes, and status says so in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from heron_py.cli.main import main
from heron_py.planner.packing import round_robin
from heron_py.state.localfs import LocalFsStateManager
from tests.fakes import spout_bolt_topology


def test_status_shows_a_live_rescale_under_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("HERON_PY_HOME", str(tmp_path))
    state = LocalFsStateManager(tmp_path)
    topo = spout_bolt_topology()
    state.set_secret("t", b"k" * 32)
    state.set_topology(topo)
    state.set_packing_plan("t", round_robin(topo, 2))
    state.set_execution_state("t", {"state": "RUNNING", "instances": {},
                                    "rescale": {"phase": "draining", "added": [5, 6], "removed": []}})
    assert main(["status", "local", "t"]) == 0
    out = capsys.readouterr().out
    assert "  live rescale under way (draining): adding tasks [5, 6], removing tasks []\n" in out
    assert main(["status", "local", "t", "--json"]) == 0
    assert '"phase": "draining"' in capsys.readouterr().out
