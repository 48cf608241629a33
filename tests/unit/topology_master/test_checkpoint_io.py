"""The master's checkpoint I/O (topology_master/checkpoint_io.py): a master that lost its
session, or whose epoch is no longer the newest, changes nothing in the storage: no marker,
no garbage collection, no discard (a zombie master's idea of what to keep is stale)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from heron_py.checkpoint.storage import LocalFsStorage
from tests.support import mark_saved
from topology_master.checkpoint_io import SessionLost, StorageWorker, Superseded


def _storage(tmp_path: Path) -> LocalFsStorage:
    s = LocalFsStorage(tmp_path / "ckpt")
    for cid in (1, 2, 3):
        s.save("wc", cid, 0, b"x")
        mark_saved(s, "wc", cid)
    return s


def test_a_master_without_its_session_collects_nothing(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    w = StorageWorker("wc", storage, None, logging.getLogger("test"), epoch=1, session_ok=lambda: False)
    with pytest.raises(SessionLost):
        w.gc(1, ())
    with pytest.raises(SessionLost):
        w.mark(4, (0,), {"c": (0,)})
    assert storage.completed_ids("wc") == [1, 2, 3]
    w.close()


def test_a_superseded_master_collects_nothing(tmp_path: Path) -> None:
    storage = _storage(tmp_path)
    w = StorageWorker("wc", storage, None, logging.getLogger("test"), epoch=1, epoch_now=lambda: 2)
    with pytest.raises(Superseded) as e:
        w.gc(1, ())
    assert str(e.value) == "a newer master took over (epoch 2, ours 1)"
    assert storage.completed_ids("wc") == [1, 2, 3]
    current = StorageWorker("wc", storage, None, logging.getLogger("test"), epoch=2, epoch_now=lambda: 2)
    assert current.gc(1, ()) == ([1, 2], [3])
    w.close()
    current.close()
