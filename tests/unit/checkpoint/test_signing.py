"""Checkpoint files are signed under the topology secret (issue 34, item 4): a task never
unpickles a file that was changed, or moved from another task or checkpoint, in a shared
checkpoint folder; a topology folder another user may write is refused."""

from __future__ import annotations

import os
import shutil

import pytest

from heron_py.checkpoint.storage import CheckpointError, CorruptCheckpointError, LocalFsStorage
from tests.support import mark_saved

SECRET = b"k" * 32


def _saved(tmp_path) -> LocalFsStorage:
    s = LocalFsStorage(tmp_path, secret=SECRET)
    s.save("wc", 1, 0, b"state of task 0")
    s.save("wc", 1, 1, b"state of task 1")
    mark_saved(s, "wc", 1)
    return s


def test_signed_files_load_under_the_secret_and_tools_can_still_read_them(tmp_path) -> None:
    s = _saved(tmp_path)
    assert s.load("wc", 1, 0) == b"state of task 0"
    assert LocalFsStorage(tmp_path).load("wc", 1, 1) == b"state of task 1"  # checksum only, for tools


def test_a_file_moved_from_another_task_or_signed_with_another_secret_is_refused(tmp_path) -> None:
    s = _saved(tmp_path)
    path = tmp_path / "wc" / "1" / "0"
    shutil.copy(tmp_path / "wc" / "1" / "1", path)  # its checksum is fine: only the MAC tells
    with pytest.raises(CorruptCheckpointError) as e:
        s.load("wc", 1, 0)
    assert str(e.value) == (f"checkpoint file {path}: its MAC does not match the topology secret (the file was "
                            f"changed or moved from elsewhere after it was saved); refusing to load it")
    other = LocalFsStorage(tmp_path / "x", secret=b"o" * 32)
    other.save("wc", 1, 0, b"forged")
    mark_saved(other, "wc", 1)
    shutil.copy(tmp_path / "x" / "wc" / "1" / "0", path)
    with pytest.raises(CorruptCheckpointError, match="its MAC does not match the topology secret"):
        s.load("wc", 1, 0)


def test_an_unsigned_file_is_refused_where_a_secret_is_held(tmp_path) -> None:
    LocalFsStorage(tmp_path).save("wc", 1, 0, b"unsigned")
    LocalFsStorage(tmp_path).mark_complete("wc", 1, [0], {})
    with pytest.raises(CorruptCheckpointError, match=r"bad header: expected magic b'HPCK' version 2 \(signed under "
                                                     r"the topology secret\), found magic b'HPCK' version 1"):
        LocalFsStorage(tmp_path, secret=SECRET).load("wc", 1, 0)


def test_a_topology_folder_others_may_write_is_refused(tmp_path) -> None:
    top = tmp_path / "wc"
    top.mkdir()
    os.chmod(top, 0o777)
    with pytest.raises(CheckpointError) as e:
        LocalFsStorage(tmp_path, secret=SECRET).save("wc", 1, 0, b"x")
    assert str(e.value) == (f"checkpoint folder {top}: expected a folder of user {os.geteuid()} that no other user "
                            f"may write, found a folder of user {os.geteuid()} with mode 777; refusing to use it "
                            f"(choose another heron_py.checkpoint.root, or fix its owner and mode)")
