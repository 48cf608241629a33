"""The stream manager's AckService around the shared XOR tracker (heron_py.acking.tracker):
ACK_BATCH frames in, one ACK_RESULT frame per spout task out, rotation on its timer."""

from __future__ import annotations

import asyncio
import logging

import pytest

from heron_py.common.framing import (
    ACK_ACK,
    ACK_FAIL,
    ACK_INIT,
    ACK_RECORD,
    BODY_OFFSET,
    RESULT_ACKED,
    RESULT_FAILED,
    RESULT_RECORD,
    RESULT_TIMED_OUT,
    MsgType,
    batch_dest,
    encode_batch_frame,
    frame_type,
)
from stream_manager.acking import AckService


def _batch(spout_task: int, *records: tuple[int, int, int]) -> bytes:
    body = b"".join(ACK_RECORD.pack(*r) for r in records)
    return encode_batch_frame(spout_task, 9, body, MsgType.ACK_BATCH, len(records))


def _sent(frames: list[tuple[int, bytes]]) -> list[tuple[int, list[tuple[int, int]]]]:
    out = []
    for task, frame in frames:
        assert frame_type(frame) == MsgType.ACK_RESULT and batch_dest(frame) == task
        out.append((task, list(RESULT_RECORD.iter_unpack(frame[BODY_OFFSET:]))))
    return out


def test_a_batch_sends_one_result_frame_per_spout_task_and_logs_unknown_kinds(
        caplog: pytest.LogCaptureFixture) -> None:
    frames: list[tuple[int, bytes]] = []
    svc = AckService(lambda task, f: frames.append((task, f)), logging.getLogger("test.acking"))
    svc.on_ack_batch(_batch(4, (ACK_INIT, 1, 0xA), (ACK_INIT, 2, 0xB)))
    assert frames == [] and svc.pending == 2
    with caplog.at_level(logging.WARNING, logger="test.acking"):
        svc.on_ack_batch(_batch(4, (ACK_FAIL, 2, 0), (7, 3, 0x1), (ACK_ACK, 1, 0xA)))
    assert _sent(frames) == [(4, [(RESULT_FAILED, 2), (RESULT_ACKED, 1)])]
    assert [r.getMessage() for r in caplog.records] == ["ack record of unknown kind 7 for task 4; ignored"]
    assert svc.pending == 0


def test_a_body_of_broken_records_is_dropped_whole_logged_and_the_service_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    frames: list[tuple[int, bytes]] = []
    svc = AckService(lambda task, f: frames.append((task, f)), logging.getLogger("test.acking"))
    svc.on_ack_batch(_batch(4, (ACK_INIT, 1, 0xA)))
    broken = ACK_RECORD.pack(ACK_ACK, 1, 0xA) + b"\x02\x00\x01"
    with caplog.at_level(logging.WARNING, logger="test.acking"):
        svc.on_ack_batch(encode_batch_frame(4, 9, broken, MsgType.ACK_BATCH, 1))
    assert [r.getMessage() for r in caplog.records] == [
        "ACK_BATCH for task 4 dropped: ACK_BATCH body: expected a multiple of 17 bytes (kind, root id, value "
        "per record), found 20 bytes; no record of it was applied"]
    assert frames == [] and svc.pending == 1  # the whole record in it was not applied either
    svc.on_ack_batch(_batch(4, (ACK_ACK, 1, 0xA)))
    assert _sent(frames) == [(4, [(RESULT_ACKED, 1)])] and svc.pending == 0


def test_rotation_times_out_after_its_buckets_and_reads_the_timeout_each_time() -> None:
    frames: list[tuple[int, bytes]] = []
    svc = AckService(lambda task, f: frames.append((task, f)), logging.getLogger("test.acking"))
    svc.on_ack_batch(_batch(5, (ACK_INIT, 8, 0xC)))
    slept: list[float] = []
    timeouts = iter([30.0, 30.0, 10.0])

    async def sleep(s: float) -> None:
        slept.append(s)
        if len(slept) > 3:
            raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(svc.run_rotation(lambda: next(timeouts, 10.0), sleep))
    # 3 buckets rotated every T/2: the root goes at the third rotation (between T and 1.5 T)
    assert slept == [15.0, 15.0, 5.0, 5.0]
    assert _sent(frames) == [(5, [(RESULT_TIMED_OUT, 8)])] and svc.pending == 0
