"""Checkpoint reads under the checkpoint key (heron_py/checkpoint/storage.py): a complete marker
counts only when it is signed under the key (the master acts on ``completed_ids``; tasks, the
Kafka spout among them, learn of complete checkpoints only from the master's word), the
shared-folder store signs like the local one, and a topology folder its group may write is
refused like one anyone may write, while the folders the store makes stay writable by their
owner alone whatever the umask."""

from __future__ import annotations

import os
import shutil
import stat

import pytest

from heron_py.checkpoint.storage import (
    SIGNED_VERSION,
    CheckpointError,
    CorruptCheckpointError,
    LocalFsStorage,
    SharedDirStorage,
)
from tests.support import mark_saved

KEY = b"k" * 32


def _complete(storage: LocalFsStorage, checkpoint_id: int) -> None:
    storage.save("wc", checkpoint_id, 0, f"state {checkpoint_id}".encode())
    mark_saved(storage, "wc", checkpoint_id)


def test_only_markers_signed_under_the_key_make_a_checkpoint_complete(tmp_path) -> None:
    keyed = LocalFsStorage(tmp_path, secret=KEY)
    _complete(keyed, 1)
    _complete(LocalFsStorage(tmp_path), 2)  # someone who may write the folder, without the key
    _complete(LocalFsStorage(tmp_path, secret=b"x" * 32), 3)  # another key
    _complete(keyed, 4)
    shutil.copy(tmp_path / "wc" / "1" / "_COMPLETE", tmp_path / "wc" / "4" / "_COMPLETE")  # moved from 1
    assert keyed.completed_ids("wc") == [1]
    assert LocalFsStorage(tmp_path).completed_ids("wc") == [1, 2, 3, 4]  # tools check the checksum only


def test_the_shared_folder_store_signs_and_checks_under_the_key(tmp_path) -> None:
    shared = SharedDirStorage(tmp_path, secret=KEY)
    shared.save("wc", 1, 0, b"state of task 0")
    shared.save("wc", 1, 1, b"state of task 1")
    mark_saved(shared, "wc", 1)
    assert (tmp_path / "wc" / "1" / "0").read_bytes()[4] == SIGNED_VERSION
    assert shared.load("wc", 1, 0) == b"state of task 0"
    path = tmp_path / "wc" / "1" / "0"
    shutil.copy(tmp_path / "wc" / "1" / "1", path)
    with pytest.raises(CorruptCheckpointError) as e:
        shared.load("wc", 1, 0)
    assert str(e.value) == (f"checkpoint file {path}: its MAC does not match the topology secret (the file was "
                            f"changed or moved from elsewhere after it was saved); refusing to load it")


def test_a_topology_folder_its_group_may_write_is_refused(tmp_path) -> None:
    top = tmp_path / "wc"
    top.mkdir()
    os.chmod(top, 0o775)
    with pytest.raises(CheckpointError) as e:
        LocalFsStorage(tmp_path, secret=KEY).save("wc", 1, 0, b"x")
    assert str(e.value) == (f"checkpoint folder {top}: expected a folder of user {os.geteuid()} that no other user "
                            f"may write, found a folder of user {os.geteuid()} with mode 775; refusing to use it "
                            f"(choose another heron_py.checkpoint.root, or fix its owner and mode)")


def test_the_folders_the_store_makes_are_its_owners_alone_under_a_umask_of_002(tmp_path) -> None:
    old = os.umask(0o002)
    try:
        LocalFsStorage(tmp_path, secret=KEY).save("wc", 1, 0, b"x")
    finally:
        os.umask(old)
    for folder in (tmp_path / "wc", tmp_path / "wc" / "1"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o755, folder
    LocalFsStorage(tmp_path, secret=KEY).save("wc", 2, 0, b"y")  # a new store (a restarted task) accepts it
