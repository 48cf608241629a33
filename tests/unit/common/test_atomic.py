"""Atomic writes (heron_py.common.atomic) of state documents and restarts.json: a crash
mid-write leaves the old content, and a private file is private from its first byte."""

from __future__ import annotations

import json
import os
import types
from pathlib import Path

import pytest

from heron_py.common.atomic import atomic_write_bytes
from heron_py.common.container_layout import TopologyPaths
from heron_py.scheduler.executor import Executor
from heron_py.state import LocalFsStateManager


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
    paths = TopologyPaths.of("wc", tmp_path)
    folder = paths.container(0)
    folder.mkdir(parents=True, exist_ok=True)
    ex = types.SimpleNamespace(container=0, paths=paths, children=[types.SimpleNamespace(name="stmgr", restarts=1)])
    Executor._write_restarts(ex)  # type: ignore[arg-type]
    assert json.loads((folder / "restarts.json").read_text()) == {"stmgr": 1}
    ex.children[0].restarts = 2
    _fail_fsync(monkeypatch)
    with pytest.raises(OSError, match="simulated crash mid-write"):
        Executor._write_restarts(ex)  # type: ignore[arg-type]
    assert json.loads((folder / "restarts.json").read_text()) == {"stmgr": 1}
    assert sorted(p.name for p in folder.iterdir()) == ["restarts.json"]
