"""heron_py.testing.wire.InProcessWire: each kind of frame goes where the daemons would send it."""

from __future__ import annotations

import pytest
from google.protobuf.message import Message

from heron_py.common.framing import MsgType, encode_batch_frame, encode_frame, encode_marker
from heron_py.common.wire import WireError, encode_msg
from heron_py.testing.wire import InProcessWire
from proto import heron_py_pb2 as pb


def test_batches_and_markers_go_to_their_task_in_order_acks_to_the_tracker_reports_to_the_master() -> None:
    acks: list[bytes] = []
    reports: list[Message] = []
    wire = InProcessWire([1, 2], on_acks=acks.append)
    tuples, marker = encode_batch_frame(2, 1, b"rows"), encode_marker(2, 1, 7)
    ack = encode_batch_frame(1, 2, b"acks", MsgType.ACK_BATCH)
    saved = pb.CheckpointSaved(checkpoint_id=7, task_id=2, stored=True)
    wire.send([tuples, ack, encode_msg(saved), marker])
    assert wire.route(reports.append) is True
    assert list(wire.inboxes[2]) == [tuples, marker] and not wire.inboxes[1]
    assert acks == [ack] and reports == [saved]
    assert wire.route(reports.append) is False  # nothing left


def test_without_a_master_or_a_tracker_reports_and_acks_are_dropped_undecoded() -> None:
    wire = InProcessWire([1])
    wire.send([encode_batch_frame(1, 1, b"acks", MsgType.ACK_BATCH), encode_frame(MsgType.CHECKPOINT_SAVED, b"\xff")])
    assert wire.route() is True and not wire.inboxes[1]


def test_a_report_that_does_not_decode_is_refused_as_a_daemon_refuses_it() -> None:
    wire = InProcessWire([1])
    wire.send([encode_frame(MsgType.CHECKPOINT_SAVED, b"\xff\xff")])
    with pytest.raises(WireError, match="an in-process task"):
        wire.route(lambda msg: None)


def test_clear_drops_what_is_queued_and_what_waits_in_the_inboxes() -> None:
    wire = InProcessWire([1])
    wire.send([encode_batch_frame(1, 1, b"a")])
    wire.route()
    wire.send([encode_batch_frame(1, 1, b"b")])
    wire.clear()
    assert not wire.route() and not wire.inboxes[1]
