"""Checkpoint storage (issue 17): atomic writes, GC, corrupt files refused, incomplete never loaded."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import pytest

from heron_py.checkpoint.storage import (
    HEADER_SIZE,
    CheckpointError,
    CorruptCheckpointError,
    IncompleteCheckpointError,
    LocalFsStorage,
    Marker,
    SharedDirStorage,
    TransientCheckpointError,
    encode_frame,
)
from tests.support import no_free_descriptors


def complete(s: LocalFsStorage, cid: int, tasks: dict[int, bytes]) -> None:
    for t, data in tasks.items():
        s.save("wc", cid, t, data)
    s.mark_complete("wc", cid, tasks, {"c": tuple(tasks)})


def test_save_mark_load_roundtrip_and_layout(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    complete(s, 1, {0: b"spout state", 3: b""})
    assert s.load("wc", 1, 0) == b"spout state"
    assert s.load("wc", 1, 3) == b""
    assert s.load("wc", 1, 9) is None  # a task that saved nothing in it (a new task)
    assert sorted(p.name for p in (tmp_path / "wc" / "1").iterdir()) == ["0", "3", "_COMPLETE"]
    assert s.completed_ids("wc") == [1] and s.completed_ids("other") == []
    with pytest.raises(CheckpointError, match="already complete, task 5 cannot save into it"):
        s.save("wc", 1, 5, b"late")


def test_incomplete_checkpoints_are_never_loaded(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    s.save("wc", 4, 0, b"half")
    with pytest.raises(IncompleteCheckpointError) as e:
        s.load("wc", 4, 0)
    assert str(e.value) == (f"checkpoint 4 of topology 'wc': not complete (no _COMPLETE in {tmp_path}/wc/4); "
                            "only complete checkpoints are loaded")
    with pytest.raises(IncompleteCheckpointError) as e:
        s.mark_complete("wc", 5, [0, 3], {})
    assert str(e.value) == (f"checkpoint 5 of topology 'wc': cannot mark complete, task(s) [0, 3] reported "
                            f"saving state but {tmp_path}/wc/5 has none for them")
    assert s.completed_ids("wc") == [] and s.checkpoint_ids("wc") == [4]


def test_atomic_write_survives_a_crash_that_left_a_temp_file(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    s.save("wc", 2, 7, b"v1")
    folder = tmp_path / "wc" / "2"
    # a crash mid-write of v2: the temp file holds part of it, the rename never happened
    (folder / ".tmp-7.crashed").write_bytes(encode_frame(b"v2 that never finished")[:20])
    s.mark_complete("wc", 2, [7], {})
    assert s.load("wc", 2, 7) == b"v1"
    assert s.checkpoint_ids("wc") == [2] and s.completed_ids("wc") == [2]
    s.save("wc", 3, 7, b"v3")  # the store keeps working
    s.mark_complete("wc", 3, [7], {})
    assert s.load("wc", 3, 7) == b"v3"
    # and a temp folder left by a crash in the middle of a gc is not taken for a checkpoint
    (tmp_path / "wc" / ".tmp-gone-1-abc").mkdir()
    assert s.checkpoint_ids("wc") == [2, 3]


def test_gc_keeps_the_last_k_completed_and_the_newer_incomplete(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    for cid in (1, 2, 4, 6):
        complete(s, cid, {0: b"x%d" % cid})
    s.save("wc", 3, 0, b"aborted")  # older than the kept ones: abandoned
    s.save("wc", 7, 0, b"under way")  # newer: may be under way
    assert s.gc("wc") == [1, 2, 3]
    assert s.checkpoint_ids("wc") == [4, 6, 7] and s.completed_ids("wc") == [4, 6]
    assert s.gc("wc", keep_last=1) == [4]
    assert s.load("wc", 6, 0) == b"x6"
    assert not [p for p in (tmp_path / "wc").iterdir() if p.name.startswith(".tmp-")]
    with pytest.raises(ValueError, match="keep_last must be >= 1, found 0"):
        s.gc("wc", keep_last=0)
    assert s.gc("none") == []


def test_delete_topology(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    complete(s, 1, {0: b"a"})
    s.delete_topology("wc")
    assert not (tmp_path / "wc").exists() and s.checkpoint_ids("wc") == []
    s.delete_topology("wc")  # nothing to delete: fine


def test_truncated_file_is_one_clear_error(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    complete(s, 1, {0: b"0123456789"})
    path = tmp_path / "wc" / "1" / "0"
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(CorruptCheckpointError) as e:
        s.load("wc", 1, 0)
    assert str(e.value) == f"checkpoint file {path}: truncated or padded: header says 10 bytes of state, found 7"
    path.write_bytes(path.read_bytes()[:10])
    with pytest.raises(CorruptCheckpointError) as e:
        s.load("wc", 1, 0)
    assert str(e.value) == f"checkpoint file {path}: truncated header: expected {HEADER_SIZE} bytes, found 10"


def test_corrupt_file_is_one_clear_error(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    complete(s, 1, {0: b"0123456789"})
    path = tmp_path / "wc" / "1" / "0"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CorruptCheckpointError) as e:
        s.load("wc", 1, 0)
    good = encode_frame(b"0123456789")[13:45].hex()
    bad = hashlib.sha256(bytes(raw[HEADER_SIZE:])).hexdigest()
    assert str(e.value) == f"checkpoint file {path}: checksum mismatch: header says sha256 {good}, found {bad}"
    path.write_bytes(b"not a checkpoint at all, just some text of enough length")
    with pytest.raises(CorruptCheckpointError) as e:
        s.load("wc", 1, 0)
    assert str(e.value) == (f"checkpoint file {path}: bad header: expected magic b'HPCK' version 1 or 2, "
                            "found magic b'not ' version 97")


def test_missing_task_file_or_corrupt_marker_is_an_error_not_empty_state(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    complete(s, 1, {0: b"a", 1: b"b"})
    os.unlink(tmp_path / "wc" / "1" / "1")
    with pytest.raises(CorruptCheckpointError) as e:
        s.load("wc", 1, 1)
    assert str(e.value) == f"checkpoint file {tmp_path}/wc/1/1: missing, but the complete marker lists task 1"
    (tmp_path / "wc" / "1" / "_COMPLETE").write_bytes(encode_frame(b"[1, 2]"))
    with pytest.raises(CorruptCheckpointError,
                       match=r"_COMPLETE: expected \{\"tasks\": \[ids\], \"packing\": \{component: \[ids\]\}\}, "
                             r"found b'\[1, 2\]'"):
        s.load("wc", 1, 0)


def test_a_checkpoint_removed_by_gc_while_it_is_read_is_not_called_corrupt(tmp_path: Path) -> None:
    """The interleaving a reader met in a run (the master's gc and a reader of checkpoint 1):
    the marker is read, then gc renames the checkpoint away, then the task's file is missing."""

    class GcBetween(LocalFsStorage):
        def _marker_once(self, topology: str, checkpoint_id: int) -> Marker:
            marker = super()._marker_once(topology, checkpoint_id)
            assert self.gc(topology, keep_last=2) == [1]
            return marker

    s = GcBetween(tmp_path, retries=0)
    for cid in (1, 2, 3):
        complete(s, cid, {0: b"a"})
    # transient (issue 37): the master retries the checkpoint rather than dropping it and every newer one
    with pytest.raises(TransientCheckpointError) as e:
        s.load("wc", 1, 0)
    assert str(e.value) == ("checkpoint 1 of topology 'wc': removed while task 0's state was being read "
                            "(garbage collection of old checkpoints)")
    # the store's own retry finds it gone for good: incomplete, a permanent error for that id only
    again = GcBetween(tmp_path / "b", sleep=lambda s: None)
    for cid in (1, 2, 3):
        complete(again, cid, {0: b"a"})
    with pytest.raises(IncompleteCheckpointError, match=r"checkpoint 1 of topology 'wc': not complete"):
        again.load("wc", 1, 0)


def test_hostile_names_and_ids_are_refused(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    for name in ("", "..", "../x", ".hidden", "a/b"):
        with pytest.raises(ValueError, match="bad topology name"):
            s.save(name, 1, 0, b"")
    with pytest.raises(ValueError, match="checkpoint id must be an int >= 1, found 0"):
        s.save("wc", 0, 0, b"")
    with pytest.raises(ValueError, match="task id must be an int >= 0, found -1"):
        s.save("wc", 1, -1, b"")


def test_shared_dir_must_exist_and_be_writable(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError) as e:
        SharedDirStorage(tmp_path / "not-mounted")
    assert str(e.value) == (f"shared checkpoint folder {tmp_path}/not-mounted: expected an existing folder "
                            "shared by the hosts, found none")
    shared = SharedDirStorage(tmp_path)
    complete(shared, 1, {0: b"a"})
    assert LocalFsStorage(tmp_path).load("wc", 1, 0) == b"a"  # same files as the local store
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        with pytest.raises(CheckpointError, match="expected a writable folder, found Permission denied"):
            SharedDirStorage(ro)


# --- issue 37: transient load errors, gc protection ---

def test_too_many_open_files_is_transient_and_retried(tmp_path: Path) -> None:
    """A real EMFILE: the process's descriptor limit lowered and used up, then freed."""
    s = LocalFsStorage(tmp_path, retries=1, sleep=lambda _: None)
    complete(s, 1, {0: b"a"})
    with no_free_descriptors(), pytest.raises(TransientCheckpointError) as err:
        s.load("wc", 1, 0)
    assert str(err.value).startswith("checkpoint 1 of topology 'wc': task 0's state: EMFILE Too many open files")
    assert s.load("wc", 1, 0) == b"a"


@pytest.mark.parametrize("code", [errno.ESTALE, errno.EIO])
def test_stale_nfs_handles_and_io_errors_are_retried_then_transient(tmp_path: Path, code: int) -> None:
    """ESTALE and EIO cannot be made on a local disk: the read raises them (a mocked OSError)."""

    class Flaky(LocalFsStorage):
        failures = 0

        def _load_once(self, topology: str, checkpoint_id: int, task_id: int) -> bytes | None:
            if self.failures:
                self.failures -= 1
                raise OSError(code, os.strerror(code), "/nfs/wc/1/0")
            return super()._load_once(topology, checkpoint_id, task_id)

    delays: list[float] = []
    s = Flaky(tmp_path, retries=2, retry_delay_s=0.05, sleep=delays.append)
    complete(s, 1, {0: b"a"})
    s.failures = 2
    assert s.load("wc", 1, 0) == b"a"  # the store's own retries cure a blip
    assert delays == [0.05, 0.1]
    s.failures = 3
    with pytest.raises(TransientCheckpointError) as e:
        s.load("wc", 1, 0)
    assert str(e.value) == (f"checkpoint 1 of topology 'wc': task 0's state: {errno.errorcode[code]} "
                            f"{os.strerror(code)} (/nfs/wc/1/0)")


def test_a_permanent_os_error_is_not_called_transient(tmp_path: Path) -> None:
    delays: list[float] = []
    s = LocalFsStorage(tmp_path, sleep=delays.append)
    complete(s, 1, {0: b"a"})
    (tmp_path / "wc" / "1" / "0").unlink()
    (tmp_path / "wc" / "1" / "0").mkdir()  # a real EISDIR: no retry will cure it
    with pytest.raises(IsADirectoryError):
        s.load("wc", 1, 0)
    assert delays == []


def test_gc_never_deletes_the_checkpoint_the_tasks_loaded(tmp_path: Path) -> None:
    """Hole 3: after a fallback to 1, two new checkpoints and gc(keep_last=2) deleted 1 while
    the running tasks' state came from it."""
    s = LocalFsStorage(tmp_path)
    for cid in (1, 2, 3, 4):
        complete(s, cid, {0: b"a"})
    assert s.gc("wc", keep_last=2, protect=[1]) == [2]
    assert s.completed_ids("wc") == [1, 3, 4]
    assert s.gc("wc", keep_last=2) == [1]


def test_the_marker_lists_the_tasks_the_master_counted_not_the_files_in_the_folder(tmp_path: Path) -> None:
    """A file no task reported (left by an earlier run's task, or put there) is never loaded; a
    stateless task's absence is no state; the marker keeps the packing it was taken under."""
    s = LocalFsStorage(tmp_path)
    s.save("wc", 4, 1, b"state of task 1")
    s.save("wc", 4, 9, b"a stray file")
    s.mark_complete("wc", 4, [1], {"count": (1,), "sink": (2, 3)})
    assert s.load("wc", 4, 1) == b"state of task 1"
    assert s.load("wc", 4, 9) is None
    assert s.marker("wc", 4) == Marker(frozenset({1}), {"count": (1,), "sink": (2, 3)})
    # a checkpoint of stateless tasks only: a folder for its marker alone
    s.mark_complete("wc", 5, [], {"sink": (2, 3)})
    assert s.completed_ids("wc") == [4, 5] and s.load("wc", 5, 2) is None


def test_a_marker_without_the_packing_is_read_and_restores_anywhere(tmp_path: Path) -> None:
    marker = Marker.decode(b'{"tasks": [1, 2]}', "old")
    assert marker == Marker(frozenset({1, 2}), None)
