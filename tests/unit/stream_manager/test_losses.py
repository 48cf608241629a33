"""The stream manager's loss reports (stream_manager/losses.py) alone: the request names this
stream manager's container, and each step says what happened in one log line (an operator
reading a stream manager's log follows a rollback by these lines)."""

from __future__ import annotations

import logging

import pytest

from heron_py.common.framing import MsgType, frame_type
from proto import heron_py_pb2 as pb
from stream_manager.losses import LossReport


def _answer(restore_id: int, acted: bool, reason: str) -> pb.RollbackAnswer:
    return pb.RollbackAnswer(restore_id=restore_id, acted=acted, reason=reason)


def test_each_step_of_a_loss_is_one_line_and_the_request_names_the_container(
        caplog: pytest.LogCaptureFixture) -> None:
    sent: list[bytes] = []
    losses = LossReport(3, logging.getLogger("stmgr[3]"), sent.append)
    with caplog.at_level(logging.INFO, logger="stmgr[3]"):
        assert losses.loss(7, "the connection to stream manager 1 closed")
        [req] = sent
        assert frame_type(req) == MsgType.ROLLBACK_REQUEST
        msg = pb.RollbackRequest.FromString(req[6:])
        assert (msg.container, msg.restore_id, msg.reason) == (3, 7, "the connection to stream manager 1 closed")
        assert not losses.admits_marker() and not losses.admits_marker()
        losses.on_answer(_answer(7, False, "restore 7, restoring"))
        assert losses.markers_dropped == 0
        assert losses.loss(7, "frames dropped (held-overflow)")
        losses.on_answer(_answer(7, True, "stream manager 3: frames dropped (held-overflow)"))
        assert not losses.admits_marker()
        losses.on_restore(8)
    assert [r.getMessage() for r in caplog.records] == [
        "effectively once: the connection to stream manager 1 closed; asking the master to roll back the run of "
        "restore 7 (no checkpoint marker passes until it answers)",
        "the master answered our rollback request for restore 7 as moot (restore 7, restoring); markers dropped "
        "meanwhile: 2",
        "effectively once: frames dropped (held-overflow); asking the master to roll back the run of restore 7 (no "
        "checkpoint marker passes until it answers)",
        "the master rolls back the run of restore 7 (stream manager 3: frames dropped (held-overflow))",
        "restore 8 replaces the run whose loss we reported (markers dropped meanwhile: 1)"]
    assert losses.markers_dropped == 0 and losses.unanswered() == [] and losses.admits_marker()
