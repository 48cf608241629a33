"""Every read of the signed topology document checks its signature, the CLI's included: a
document changed in the state store (its pickled classes would run in every instance) is
refused by ``heron-py update`` before it is stored again, so it is never signed anew, and by
``heron-py metrics``; ``heron-py kill`` still removes such a topology. Real CLI processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.cli.lifecycle import update_topology
from heron_py.common.signing import document_problem
from heron_py.planner.packing import round_robin
from heron_py.state import LocalFsStateManager, StateManagerError
from tests.fakes import Counter, WordSpout

SECRET = b"k" * 32
REFUSAL = ("topology 'signed': refusing the stored topology document: expected an HMAC-SHA256 signature under the "
           "topology secret, found a signature that does not match the document (it was changed in the state store "
           "after submit, or stored by a heron-py that did not sign it; resubmit the topology)")


def _tampered(home: Path) -> tuple[LocalFsStateManager, Path, bytes]:
    b = TopologyBuilder("signed")
    spout = b.add_spout("words", WordSpout, par=1)
    b.add_bolt("count", Counter, par=1, inputs={spout: Grouping.SHUFFLE})
    topo = b.build()
    state = LocalFsStateManager(home)
    state.set_secret("signed", SECRET)
    state.set_topology(topo)
    state.set_packing_plan("signed", round_robin(topo, 1))
    path = home / "state" / "topologies" / "signed"
    doc = json.loads(path.read_bytes())
    doc["config"]["topology.debug"] = "true"  # one value changed by someone with write access
    path.write_text(json.dumps(doc))
    return state, path, path.read_bytes()


class NoScheduler:
    kind = "local"

    def restart(self, *args: Any) -> None:
        raise AssertionError("a refused document must restart nothing")


def test_update_refuses_a_changed_document_and_never_signs_it(tmp_path: Path) -> None:
    state, path, tampered = _tampered(tmp_path)
    with pytest.raises(StateManagerError) as e:
        update_topology(state, NoScheduler(), "signed", {"count": 2}, wait_s=0.1)  # type: ignore[arg-type]
    assert str(e.value) == REFUSAL
    assert path.read_bytes() == tampered
    assert document_problem(json.loads(tampered), SECRET) == "a signature that does not match the document"


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "heron_py.cli.main", *args], capture_output=True, text=True,
                          env={**os.environ, "HERON_PY_HOME": str(home)}, timeout=120)


def test_the_cli_refuses_it_in_one_line_and_still_kills_it(tmp_path: Path) -> None:
    _, path, tampered = _tampered(tmp_path)
    for args in (("update", "local", "signed", "--component-parallelism", "count:2", "--wait", "1"),
                 ("metrics", "local", "signed")):
        p = _cli(tmp_path, *args)
        assert (p.returncode, p.stdout, p.stderr) == (1, "", f"heron-py: error: {REFUSAL}\n"), args
    assert path.read_bytes() == tampered
    p = _cli(tmp_path, "kill", "local", "signed")
    assert p.returncode == 0 and p.stdout.startswith("topology 'signed' killed"), p.stderr
    assert not path.exists()
