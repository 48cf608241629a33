"""Restore and checkpoint ids come from the master's election epoch (``epoch << 32 | n``), never
the wall clock; a new master never reuses a checkpoint id an older master's tasks may still be
saving into (issue 37, hole 4 and part of 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from heron_py.checkpoint.storage import LocalFsStorage
from heron_py.common.framing import MsgType
from tests.unit.topology_master.test_checkpoints import TOPOLOGY, Harness, save_files
from topology_master.checkpoints import driver_status, first_checkpoint_id, restore_wire_id


def test_wire_ids_order_by_epoch_first() -> None:
    assert restore_wire_id(1, 1) == (1 << 32) + 1
    assert restore_wire_id(2, 1) > restore_wire_id(1, (1 << 32) - 1)
    with pytest.raises(ValueError) as e:
        restore_wire_id(1, 1 << 32)
    assert str(e.value) == "restore id: the sequence number must be in 1..4294967295, found 4294967296"
    assert first_checkpoint_id(3, []) == (3 << 32) + 1
    assert first_checkpoint_id(3, [5, (3 << 32) + 7]) == (3 << 32) + 8  # above the storage too


async def test_a_master_whose_clock_is_behind_still_restores(tmp_path: Path) -> None:
    """The old ids were ``wall clock in µs + n``: a master taking over with a clock an hour
    behind sent restore ids below the ones the stream managers and instances held, which they
    ignore, and the topology stayed in RESTORING for ever."""
    storage = LocalFsStorage(tmp_path)
    old = Harness(storage, epoch=4, wall=lambda: 1_800_000_000.0)
    await old.start()
    old_rid = await old.processing()
    await old.stop()
    new = Harness(storage, epoch=5, wall=lambda: 1_800_000_000.0 - 3600)
    await new.start()
    new_rid = await new.processing()  # every task took it: processing started
    await new.stop()
    assert new_rid > old_rid
    assert (old_rid >> 32, new_rid >> 32) == (4, 5)
    # an answer to the old master's restore does not count for the new one
    before = driver_status(new.driver)
    new.restored(old_rid)
    assert driver_status(new.driver) == before


async def test_a_new_master_takes_its_first_id_above_late_saves(tmp_path: Path) -> None:
    """The old master started checkpoint N; the new master listed the storage before the old
    run's saves of N landed; old code then started its own N and the late files mixed in."""
    storage = LocalFsStorage(tmp_path)
    old = Harness(storage, epoch=1)
    await old.start()
    await old.processing()
    n = await old.next_checkpoint()
    await old.stop()  # superseded before any task saved N
    new = Harness(storage, epoch=2)
    await new.start()  # lists the storage: N has no folder yet
    save_files(storage, n)  # the old run's late saves land
    await new.processing()
    first = await new.next_checkpoint()
    await new.stop()
    assert first > n and first >> 32 == 2
    assert storage.checkpoint_ids(TOPOLOGY) == [n]  # N is the old run's alone, and never complete
    assert new.frames(MsgType.START_CHECKPOINT)[0].checkpoint_id == first
