"""Checkpoint rules the mutation run found untested: marker alignment at its bounds (a one-byte
buffer, empty batches, a batch that fills it exactly, a newer marker that completes at once),
the failure manager's limits and verdicts, which restore errors are transient, the storage the
config opens (its folder, Redis with the topology's key and timeout), and the restore command."""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from heron_py.checkpoint.alignment import (
    Abort,
    AlignmentBufferFull,
    AlignmentConfig,
    AlignState,
    Deliver,
    Forward,
    MarkerAligner,
    Save,
    UnknownChannelError,
)
from heron_py.checkpoint.failures import CheckpointFailureManager, FailureVerdict, is_transient_load_error
from heron_py.checkpoint.operator import parse_restore
from heron_py.checkpoint.select import checkpoint_location, open_checkpoint_storage
from heron_py.common.config import StatefulConfig
from tests.redis_server import RedisServer

SECRET = b"k" * 32


# --- alignment ---

def test_a_one_byte_bound_holds_empty_batches_and_one_that_fills_it_exactly() -> None:
    a: MarkerAligner[str] = MarkerAligner(1, [1, 2], AlignmentConfig(max_held_bytes=1))
    assert a.on_marker(1, 7) == []
    assert a.on_tuples(1, "empty", 0) == []  # a batch of no bytes is valid input
    assert a.on_tuples(1, "one byte", 1) == []  # up to the limit is allowed, not only below it
    assert a.on_tuples(1, "empty again", 0) == []
    with pytest.raises(AlignmentBufferFull):
        a.on_tuples(1, "too much", 1)
    assert a.on_marker(2, 7) == [Save(7), Forward(7), Deliver(1, "empty"), Deliver(1, "one byte"),
                                 Deliver(1, "empty again")]


def test_a_newer_marker_that_completes_at_once_still_releases_what_the_old_one_held() -> None:
    a: MarkerAligner[str] = MarkerAligner(1, [1, 2])
    a.on_marker(1, 4)
    a.on_tuples(1, "held", 3)
    # the only blocked channel goes away: checkpoint 4 now waits for channel 2 alone, still holding
    assert a.remove_channel(1) == []
    assert (a.state, a.waiting_for, a.held_batches) == (AlignState.ALIGNING, frozenset({2}), 1)
    # marker 5 on the last channel aborts 4 and completes 5 in one call: the abort and the held
    # input must not be lost (the held batch would never be processed)
    assert a.on_marker(2, 5) == [Abort(4, "superseded by checkpoint 5 (marker on channel 2)"), Deliver(1, "held"),
                                 Save(5), Forward(5)]


def test_removing_an_unknown_channel_and_resetting_to_none_are_refused() -> None:
    a: MarkerAligner[str] = MarkerAligner(1, [1, 2])
    with pytest.raises(UnknownChannelError) as e:
        a.remove_channel(9)
    assert str(e.value) == "task 1: a removal from channel 9, expected one of the input channels [1, 2]"
    with pytest.raises(ValueError) as v:
        a.reset([])
    assert str(v.value) == "task 1: a bolt needs at least one input channel, found none"
    assert a.channels == {1, 2}


# --- the failure manager ---

def test_a_limit_of_one_trips_on_the_first_failure_and_a_success_recovers() -> None:
    m = CheckpointFailureManager(1)
    assert m.failed(1, "timed out") == FailureVerdict(1, True, False)
    assert m.failed(2, "timed out") == FailureVerdict(2, False, False)
    assert m.succeeded() == FailureVerdict(0, False, True)
    assert m.succeeded() == FailureVerdict(0, False, False)


@pytest.mark.parametrize("bad", [True, 2.5, 0])
def test_the_limit_must_be_an_int_of_at_least_one(bad: object) -> None:
    with pytest.raises(ValueError) as e:
        CheckpointFailureManager(bad)  # type: ignore[arg-type]
    assert str(e.value) == f"checkpoint failure manager: max_consecutive must be an int >= 1, found {bad!r}"


def test_the_newest_five_reasons_are_kept() -> None:
    m = CheckpointFailureManager(3)
    for cid in range(1, 8):
        m.failed(cid, "timed out")
    assert m.reasons == tuple(f"checkpoint {cid}: timed out" for cid in range(3, 8))


@pytest.mark.parametrize(("error", "transient"), [
    (f"IOError: [Errno {errno.EIO}] {os.strerror(errno.EIO)}", True),
    (f"IOError: [Errno {errno.EACCES}] {os.strerror(errno.EACCES)}", False),
    # a file name with a "]" in it: the errno is what precedes the first one
    (f"OSError: [Errno {errno.ESTALE}] {os.strerror(errno.ESTALE)}: '/ckpt/w[1]/4/0.ckpt'", True),
])
def test_which_bare_os_errors_are_transient(error: str, transient: bool) -> None:
    assert is_transient_load_error(error) is transient


# --- the storage the config opens ---

def test_the_configured_folder_is_where_the_checkpoints_go(tmp_path: Path) -> None:
    cfg = StatefulConfig(root=str(tmp_path / "shared"))
    storage = open_checkpoint_storage(cfg, tmp_path / "home")
    storage.save("wc", 1, 0, b"x")
    assert (tmp_path / "shared").is_dir() and not (tmp_path / "home").exists()
    assert checkpoint_location(cfg, tmp_path / "home") == str(tmp_path / "shared")


def test_redis_values_are_signed_under_the_topology_key(server: RedisServer) -> None:
    from heron_py.checkpoint.redis_storage import RedisCheckpointStorage

    writer = open_checkpoint_storage(StatefulConfig(storage="redis", redis_url=server.url), Path("/nonexistent"),
                                     secret=SECRET)
    writer.save("signed", 1, 0, b"state")
    writer.mark_complete("signed", 1, [0], {"c": (0,)})
    # a task holding the key trusts only what was signed under it
    reader = RedisCheckpointStorage(server.url, secret=SECRET)
    assert reader.completed_ids("signed") == [1]
    assert reader.load("signed", 1, 0) == b"state"
    for s in (writer, reader):
        s.close()  # type: ignore[attr-defined]


def test_redis_gives_up_on_a_silent_server_after_the_configured_timeout() -> None:
    pytest.importorskip("redis")
    # a server that takes connections (the kernel's backlog) and never answers, as a hung one
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    url = f"redis://127.0.0.1:{silent.getsockname()[1]}/0"
    storage = open_checkpoint_storage(StatefulConfig(storage="redis", redis_url=url, redis_timeout_s=0.2),
                                      Path("/nonexistent"))
    outcome: list[BaseException | None] = []

    def listing() -> None:
        try:
            storage.completed_ids("wc")
            outcome.append(None)
        except BaseException as e:  # the test reports whatever it was
            outcome.append(e)

    t0 = time.monotonic()
    t = threading.Thread(target=listing, daemon=True)
    t.start()
    # 3 attempts of 0.2 s and 0.15 s of pauses; the 2 s default would take over 6 s
    t.join(2.5)
    elapsed = time.monotonic() - t0
    silent.close()  # frees a caller that would wait forever
    t.join(10)
    assert elapsed < 2.5, "the configured redis timeout was not used"
    assert len(outcome) == 1 and isinstance(outcome[0], OSError)
    assert "redis server redis://127.0.0.1:" in str(outcome[0])


# --- the operator's restore command ---

def test_restore_takes_checkpoint_one_and_only_the_restore_verb() -> None:
    assert parse_restore("restore 1") == 1
    for bad in ("stop 7", "restore", "restore 7 8"):
        with pytest.raises(ValueError) as e:
            parse_restore(bad)
        assert str(e.value) == (f"admin command {bad!r}: expected 'restore CHECKPOINT_ID' (an int > 0) or "
                                f"'restore clean', found {bad!r}")
