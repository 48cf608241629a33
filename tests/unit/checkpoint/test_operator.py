"""``heron-py restore NAME --checkpoint ID | --clean``: the parser, the admin wire and the
master's answer (AdminCommands over a small master that holds a real checkpoint driver;
issue 37)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from heron_py.checkpoint.operator import parse_restore, restore_command
from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.cli.restore import add_parser, run_restore
from heron_py.common.framing import MsgType
from heron_py.planner.model import TopologyState
from heron_py.state import StateManager
from proto import heron_py_pb2 as pb
from tests.support import mark_saved
from tests.unit.topology_master.test_checkpoints import TOPOLOGY, Harness, save_files
from topology_master.admin import AdminCommands
from topology_master.checkpoints import driver_status


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="heron-py", exit_on_error=False)
    sub = ap.add_subparsers(dest="verb")

    def add(name: str, **kw: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, exit_on_error=False, **kw)

    add_parser(add)
    return ap


def test_the_verb_takes_a_checkpoint_or_clean_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    a = parser().parse_args(["restore", "wc", "--checkpoint", "4294967297"])
    assert (a.name, a.checkpoint, a.clean) == ("wc", 4294967297, False)
    a = parser().parse_args(["restore", "wc", "--clean"])
    assert (a.checkpoint, a.clean) == (None, True)
    for bad in (["restore", "wc"], ["restore", "wc", "--clean", "--checkpoint", "3"]):
        with pytest.raises((SystemExit, argparse.ArgumentError)):
            parser().parse_args(bad)
    with pytest.raises(argparse.ArgumentError) as e:
        parser().parse_args(["restore", "wc", "--checkpoint", "x"])
    assert str(e.value) == "argument --checkpoint: expected a checkpoint id (an int > 0), found 'x'"


def test_the_admin_command_round_trips_and_refuses_garbage() -> None:
    assert [parse_restore(restore_command(c)) for c in (None, 7)] == [None, 7]
    with pytest.raises(ValueError) as e:
        parse_restore("restore 0")
    assert str(e.value) == ("admin command 'restore 0': expected 'restore CHECKPOINT_ID' (an int > 0) or "
                            "'restore clean', found 'restore 0'")


class Master:
    """The part of the topology master AdminCommands reads, holding a real checkpoint driver
    (topology_master/main.py's ``restore`` does the same, see the report of issue 37)."""

    def __init__(self, h: Harness) -> None:
        self.h = h

    @property
    def active(self) -> bool:
        return True

    def set_run_state(self, state: TopologyState) -> str:
        raise AssertionError("not used")

    def status(self) -> dict[str, Any]:
        return {"checkpoints": driver_status(self.h.driver)}

    def restore(self, checkpoint_id: int | None) -> tuple[bool, str]:
        return self.h.driver.operator_restore(checkpoint_id)


async def test_a_topology_waiting_for_the_operator_restores_what_the_operator_names(tmp_path: Path) -> None:
    storage = LocalFsStorage(tmp_path)
    for cid in (5, 6):
        save_files(storage, cid)
        mark_saved(storage, TOPOLOGY, cid)
    h = Harness(storage, epoch=2)
    await h.start()
    admin = AdminCommands(Master(h), pid=1)

    def send(state: StateManager, name: str, command: str) -> pb.AdminResponse:
        assert name == TOPOLOGY
        return admin.handle(command)

    rid = int(h.frames(MsgType.RESTORE_STATE)[-1].restore_id)
    h.restored(rid, ok=False, error="CorruptCheckpointError: a")
    rid = int(h.frames(MsgType.RESTORE_STATE)[-1].restore_id)
    h.restored(rid, ok=False, error="CorruptCheckpointError: b")
    doc = json.loads(admin.handle("status").status_json)
    assert doc["checkpoints"]["state"] == "waiting for the operator"
    assert run_restore(None, TOPOLOGY, 9, send=send) == (  # type: ignore[arg-type]
        False, "topology 'wc': checkpoint 9 is not complete in the storage; expected one of [5, 6] or --clean")
    ok, message = run_restore(None, TOPOLOGY, 5, send=send)  # type: ignore[arg-type]
    assert (ok, message) == (True, "topology 'wc': restoring checkpoint 5; checkpoints: restoring")
    assert h.frames(MsgType.RESTORE_STATE)[-1].checkpoint_id == 5
    await h.processing()
    await h.stop()
    bad = admin.handle("restore soon")
    assert (bad.ok, bad.message) == (False, "admin command 'restore soon': expected 'restore CHECKPOINT_ID' (an "
                                            "int > 0) or 'restore clean', found 'restore soon'")
