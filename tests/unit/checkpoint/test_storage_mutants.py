"""The file checkpoint store (heron_py/checkpoint/storage.py) where the mutation run found no test:
the signed file format a restore after an upgrade reads, the default retries of a transient read
(of a task's state and of the complete marker), the marker's body and its errors, the checks of
names and ids, the durability of new folders, the refusal of a topology path that is not our
folder, a shared folder that cannot be written, and the leftovers of a crash mid-write."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from heron_py.checkpoint.storage import (
    COMPLETE_MARKER,
    CheckpointError,
    CorruptCheckpointError,
    IncompleteCheckpointError,
    LocalFsStorage,
    Marker,
    SharedDirStorage,
    TransientCheckpointError,
    checkpoint_key_beside,
    checkpoint_root,
    decode_frame,
    encode_frame,
    packing_of,
)
from heron_py.common.atomic import SweepTarget, fsync_dir, sweep_temp_files
from heron_py.common.container_layout import ContainerLayout
from tests.support import no_free_descriptors

KEY = b"k" * 32
ROOT = Path(__file__).resolve().parents[3]

# checkpoint 1 of topology wc, task 0's state b"state of task 0", signed under KEY, as this release
# writes it: HPCK, version 2, length 15, sha256 of the data, HMAC-SHA256 under the key over
# b"heron-py checkpoint v1\0wc/1/0\0" + the data, then the data. A checkpoint taken before an
# upgrade must still load after it, so these bytes never change
SIGNED_STATE = bytes.fromhex(
    "4850434b02000000000000000fbc05378e139ec824afddfd94920ab66a0cefcc8686f11c8c2d01d0e71153b22c9b"
    "21e3c78458710bade90290ecd4a89a26258c435cc0a12244135d5447e58e6c7374617465206f66207461736b2030")
# its _COMPLETE marker: {"tasks": [0], "packing": {"spout": [0]}}, signed for wc/1/_COMPLETE
SIGNED_MARKER = bytes.fromhex(
    "4850434b0200000000000000299a83ce4c6a37341188df41ab78dbba4bb307ab08294bff7a4e138c15079d894246"
    "4cf81de4fcb2a47a7c0f7e71892c65687290fa8d53069054dd93ffc469845f7b227461736b73223a205b305d2c20"
    "227061636b696e67223a207b2273706f7574223a205b305d7d7d")


def complete(s: LocalFsStorage, cid: int, tasks: dict[int, bytes]) -> None:
    for t, data in tasks.items():
        s.save("wc", cid, t, data)
    s.mark_complete("wc", cid, tasks, {"c": tuple(tasks)})


# --- the file format ---
def test_files_signed_by_this_release_keep_their_bytes_and_load(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path, secret=KEY)
    s.save("wc", 1, 0, b"state of task 0")
    s.mark_complete("wc", 1, [0], {"spout": (0,)})
    assert (tmp_path / "wc" / "1" / "0").read_bytes() == SIGNED_STATE
    assert (tmp_path / "wc" / "1" / COMPLETE_MARKER).read_bytes() == SIGNED_MARKER
    # files of the same bytes written before an upgrade: loaded by a new store (a restarted task)
    old = tmp_path / "old" / "wc" / "1"
    old.mkdir(parents=True)
    (old / "0").write_bytes(SIGNED_STATE)
    (old / COMPLETE_MARKER).write_bytes(SIGNED_MARKER)
    restarted = LocalFsStorage(tmp_path / "old", secret=KEY)
    assert restarted.completed_ids("wc") == [1]
    assert restarted.marker("wc", 1) == Marker(frozenset({0}), {"spout": (0,)})
    assert restarted.load("wc", 1, 0) == b"state of task 0"


def test_the_marker_body_is_sorted_json_of_the_stored_tasks_and_the_packing(tmp_path: Path) -> None:
    """The documented body ({"tasks": [ids], "packing": {component: [ids]}}), the same bytes
    for the same checkpoint whatever order the master counted its tasks in."""
    s = LocalFsStorage(tmp_path)
    s.save("wc", 4, 3, b"c")
    s.save("wc", 4, 1, b"a")
    s.mark_complete("wc", 4, [3, 1], {"sink": (2,), "count": (3, 1)})
    path = tmp_path / "wc" / "4" / COMPLETE_MARKER
    assert decode_frame(path.read_bytes(), str(path)) == (
        b'{"tasks": [1, 3], "packing": {"count": [3, 1], "sink": [2]}}')


def test_a_corrupt_marker_names_its_file_and_shows_its_first_80_bytes(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    complete(s, 1, {0: b"a"})
    path = tmp_path / "wc" / "1" / COMPLETE_MARKER
    body = b'{"tasks": "' + b"x" * 100 + b'"}'  # a string where the list of ids belongs
    path.write_bytes(encode_frame(body))
    for read in (lambda: s.marker("wc", 1), lambda: s.load("wc", 1, 0)):
        with pytest.raises(CorruptCheckpointError) as e:
            read()
        assert str(e.value) == (f'checkpoint file {path}: expected {{"tasks": [ids], "packing": {{component: '
                                f'[ids]}}}}, found {body[:80]!r}')
    path.write_bytes(encode_frame(b'{"tasks": [1], "packing": [1]}'))  # a list where the object belongs
    with pytest.raises(CorruptCheckpointError, match=r"found b'\{\"tasks\": \[1\], \"packing\": \[1\]\}'$"):
        s.marker("wc", 1)
    # a marker whose frame does not check out: the same error as a state file's, naming the marker
    path.write_bytes(b"short")
    with pytest.raises(CorruptCheckpointError) as e:
        s.marker("wc", 1)
    assert str(e.value) == f"checkpoint file {path}: truncated header: expected 45 bytes, found 5"


def test_a_marker_moved_from_another_checkpoint_is_refused_where_the_key_is_held(tmp_path: Path) -> None:
    """Checkpoint 1's marker (task 0 only) copied over 2's would hide task 1's state: a keyed
    store refuses it when loading, as it refuses a moved state file."""
    s = LocalFsStorage(tmp_path, secret=KEY)
    complete(s, 1, {0: b"a"})
    complete(s, 2, {0: b"b", 1: b"c"})
    marker = tmp_path / "wc" / "2" / COMPLETE_MARKER
    marker.write_bytes((tmp_path / "wc" / "1" / COMPLETE_MARKER).read_bytes())
    moved = (f"checkpoint file {marker}: its MAC does not match the topology secret (the file was changed or "
             f"moved from elsewhere after it was saved); refusing to load it")
    for read in (lambda: s.marker("wc", 2), lambda: s.load("wc", 2, 1)):
        with pytest.raises(CorruptCheckpointError) as e:
            read()
        assert str(e.value) == moved
    assert LocalFsStorage(tmp_path, secret=KEY).completed_ids("wc") == [1]


def test_a_keyed_listing_skips_checkpoints_without_a_marker_file(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path, secret=KEY)
    complete(s, 1, {0: b"a"})
    s.save("wc", 2, 0, b"under way")  # no marker yet
    complete(s, 3, {0: b"c"})
    (tmp_path / "wc" / "4" / COMPLETE_MARKER).mkdir(parents=True)  # a folder where the marker belongs
    assert s.completed_ids("wc") == [1, 3]
    assert s.checkpoint_ids("wc") == [1, 2, 3, 4]


def test_packing_of_lists_each_components_tasks_in_order() -> None:
    assert packing_of({5: "sink", 3: "count", 1: "count", 2: "spout"}) == {
        "count": (1, 3), "spout": (2,), "sink": (5,)}
    assert list(packing_of({5: "sink", 3: "count", 1: "count"})) == ["count", "sink"]  # by first task id


def test_marker_of_a_checkpoint_not_complete_is_incomplete(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    s.save("wc", 3, 0, b"half")
    with pytest.raises(IncompleteCheckpointError) as e:
        s.marker("wc", 3)
    assert str(e.value) == (f"checkpoint 3 of topology 'wc': not complete (no _COMPLETE in {tmp_path}/wc/3); "
                            f"only complete checkpoints are loaded")


# --- transient reads: the store's own retries ---
class Delays(list[float]):
    """The store's sleeps, recorded; a store that retries without end fails the test instead of
    hanging it."""

    def __call__(self, delay: float) -> None:
        self.append(delay)
        if len(self) > 10:
            raise AssertionError(f"retried without end: {self}")


def test_the_default_retries_are_two_after_50_and_100_ms(tmp_path: Path) -> None:
    """The docstring's promise (retried twice, after 0.05 s and 0.1 s), for a task's state and
    for the complete marker, on a real EMFILE; the message names what could not be read."""
    delays = Delays()
    s = LocalFsStorage(tmp_path, sleep=delays)
    complete(s, 1, {0: b"a"})
    marker = tmp_path / "wc" / "1" / COMPLETE_MARKER
    with no_free_descriptors():
        with pytest.raises(TransientCheckpointError) as state_error:
            s.load("wc", 1, 0)
        load_delays = list(delays)
        delays.clear()
        with pytest.raises(TransientCheckpointError) as marker_error:
            s.marker("wc", 1)
    assert load_delays == [0.05, 0.1] and delays == [0.05, 0.1]
    too_many = os.strerror(errno.EMFILE)
    assert str(state_error.value) == f"checkpoint 1 of topology 'wc': task 0's state: EMFILE {too_many} ({marker})"
    assert str(marker_error.value) == (f"checkpoint 1 of topology 'wc': its complete marker: EMFILE {too_many} "
                                       f"({marker})")
    assert s.load("wc", 1, 0) == b"a" and s.marker("wc", 1).tasks == {0}


class ShortOfMemory(LocalFsStorage):
    """Out of memory reading the marker (a huge file, a starved host) ``failures`` times: a real
    MemoryError cannot be made safely inside the test process."""

    failures = 0

    def _marker_once(self, topology: str, checkpoint_id: int) -> Marker:
        if self.failures:
            self.failures -= 1
            raise MemoryError()
        return super()._marker_once(topology, checkpoint_id)


def test_out_of_memory_is_retried_then_transient(tmp_path: Path) -> None:
    delays = Delays()
    s = ShortOfMemory(tmp_path, retries=2, sleep=delays)
    complete(s, 1, {0: b"a"})
    s.failures = 2
    assert s.load("wc", 1, 0) == b"a"  # cured by the store's own retries
    assert delays == [0.05, 0.1]
    s.failures = 3
    with pytest.raises(TransientCheckpointError) as e:
        s.load("wc", 1, 0)
    assert str(e.value) == "checkpoint 1 of topology 'wc': out of memory reading task 0's state"
    s.failures = 3
    with pytest.raises(TransientCheckpointError) as e:
        s.marker("wc", 1)
    assert str(e.value) == "checkpoint 1 of topology 'wc': out of memory reading its complete marker"
    s.failures = 0


def test_a_transient_error_of_the_read_itself_is_retried_then_raised_as_it_is(tmp_path: Path) -> None:
    raised: list[TransientCheckpointError] = []

    class AlwaysRemoved(LocalFsStorage):
        def _load_once(self, topology: str, checkpoint_id: int, task_id: int) -> bytes | None:
            raised.append(TransientCheckpointError(f"checkpoint {checkpoint_id} of topology {topology!r}: removed "
                                                   f"while task {task_id}'s state was being read"))
            raise raised[-1]

    delays = Delays()
    s = AlwaysRemoved(tmp_path, sleep=delays)
    with pytest.raises(TransientCheckpointError) as e:
        s.load("wc", 1, 0)
    assert delays == [0.05, 0.1] and len(raised) == 3 and e.value is raised[-1]


# --- names and ids ---
def test_a_bad_task_id_to_load_or_a_checkpoint_id_that_is_no_int_is_refused(tmp_path: Path) -> None:
    s = LocalFsStorage(tmp_path)
    complete(s, 1, {0: b"a"})
    with pytest.raises(ValueError) as e:
        s.load("wc", 1, -1)
    assert str(e.value) == "checkpoint storage: task id must be an int >= 0, found -1"
    for bad in (True, 2.0):
        with pytest.raises(ValueError) as e:
            s.save("wc", bad, 0, b"x")  # type: ignore[arg-type]
        assert str(e.value) == f"checkpoint storage: checkpoint id must be an int >= 1, found {bad!r}"
    assert s.checkpoint_ids("wc") == [1]


@pytest.mark.parametrize("name", ["a\\b", "a\0b", ".", ".."])
def test_topology_names_with_a_backslash_or_a_nul_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ValueError) as e:
        LocalFsStorage(tmp_path).save(name, 1, 0, b"x")
    assert str(e.value) == (f"checkpoint storage: bad topology name {name!r}: expected a plain file name not "
                            f"starting with '.'")
    assert list(tmp_path.iterdir()) == []


# --- folders ---
def test_the_root_and_its_missing_parents_are_made(tmp_path: Path) -> None:
    root = tmp_path / "not" / "yet" / "there"
    s = LocalFsStorage(root)
    complete(s, 1, {0: b"a"})
    assert s.load("wc", 1, 0) == b"a"


def test_every_new_folder_is_made_durable_in_its_parent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder's entry is durable only once its parent is fsynced: a power cut after a save
    must not lose the checkpoint folder (or the topology's) that the save made."""
    synced: list[Path] = []
    real = fsync_dir

    def recorded(folder: Path) -> None:
        synced.append(folder)
        real(folder)

    monkeypatch.setattr("heron_py.checkpoint.storage.fsync_dir", recorded)
    root = tmp_path / "root"
    s = LocalFsStorage(root)
    s.save("wc", 1, 0, b"a")
    assert synced == [tmp_path, root, root / "wc"]  # the root, wc/ and wc/1/ were all new
    synced.clear()
    s.save("wc", 2, 0, b"b")
    assert synced == [root / "wc"]  # only wc/2/ was new
    synced.clear()
    s.save("wc", 2, 1, b"c")
    assert synced == []


def test_without_the_key_a_folder_others_may_write_is_used(tmp_path: Path) -> None:
    """The owner and mode check guards what a task unpickles; a store without the key (a tool
    reading checkpoints, checksum only) reads whatever folder it is pointed at."""
    top = tmp_path / "wc"
    top.mkdir()
    os.chmod(top, 0o777)
    s = LocalFsStorage(tmp_path)
    complete(s, 1, {0: b"a"})
    assert s.load("wc", 1, 0) == b"a"


def test_a_topology_path_that_is_not_a_folder_is_refused_where_the_key_is_held(tmp_path: Path) -> None:
    (tmp_path / "wc").write_bytes(b"a file of ours, mode 644")
    os.chmod(tmp_path / "wc", 0o644)
    with pytest.raises(CheckpointError) as e:
        LocalFsStorage(tmp_path, secret=KEY).save("wc", 1, 0, b"x")
    assert str(e.value) == (f"checkpoint folder {tmp_path}/wc: expected a folder of user {os.geteuid()} that no "
                            f"other user may write, found not a folder of user {os.geteuid()} with mode 644; "
                            f"refusing to use it (choose another heron_py.checkpoint.root, or fix its owner and "
                            f"mode)")


def test_a_shared_folder_this_user_cannot_write_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        unwritable = Path("/sys")  # root writes anywhere but into sysfs
    else:
        unwritable = tmp_path / "ro"
        unwritable.mkdir()
        unwritable.chmod(0o555)
    with pytest.raises(CheckpointError) as e:
        SharedDirStorage(unwritable)
    assert str(e.value) == (f"shared checkpoint folder {unwritable}: expected a writable folder, found "
                            f"{os.strerror(errno.EACCES)}")


_CRASH_AT_RENAME = """
import os, signal, sys
from heron_py.checkpoint.storage import LocalFsStorage
s = LocalFsStorage(sys.argv[1])
s.save("wc", 1, 0, b"v1")
os.replace = lambda src, dst: os.kill(os.getpid(), signal.SIGKILL)  # the crash: after the write, before the rename
s.save("wc", 1, 0, b"v2 never renamed")
"""


def test_a_crash_mid_save_leaves_a_temp_file_the_executors_sweep_removes(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _CRASH_AT_RENAME, str(tmp_path)], cwd=ROOT, env={
        **os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr.decode()
    folder = tmp_path / "wc" / "1"
    [leftover] = [p for p in folder.iterdir() if p.name != "0"]
    # the executor's sweep of ROOT/TOPOLOGY at its start, an hour later
    removed, errors = sweep_temp_files([SweepTarget(tmp_path / "wc", depth=2)], time.time() + 3600)
    assert removed == [leftover] and errors == []
    assert [p.name for p in folder.iterdir()] == ["0"]
    assert decode_frame((folder / "0").read_bytes(), "0") == b"v1"


# --- where the key and the checkpoints are ---
def test_the_checkpoint_key_beside_the_secret_file_else_the_secret(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_bytes(b"s" * 32)
    assert checkpoint_key_beside(secret_file, b"s" * 32) == b"s" * 32  # a daemon started by hand
    ContainerLayout(tmp_path).checkpoint_key.write_bytes(b"c" * 32)
    assert checkpoint_key_beside(secret_file, b"s" * 32) == b"c" * 32


def test_checkpoint_root_is_the_setting_else_checkpoints_under_the_home(tmp_path: Path) -> None:
    assert checkpoint_root(tmp_path, "/shared/ckpt") == Path("/shared/ckpt")
    assert checkpoint_root(tmp_path, "") == tmp_path / "checkpoints"

