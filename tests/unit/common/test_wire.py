"""The wire's registry (heron_py/common/wire.py): every message type has exactly one codec,
decode and encode round trip, and a body that does not parse is one error line."""

from __future__ import annotations

import pytest
from google.protobuf.message import Message

from heron_py.common.framing import HEADER_SIZE, FrameError, MsgType, encode_batch_frame, encode_frame
from heron_py.common.wire import MESSAGES, RAW, TYPES, WireError, decode, decode_as, encode_msg
from proto import heron_py_pb2 as pb


def test_every_message_type_has_exactly_one_codec() -> None:
    assert set(MESSAGES) | RAW == set(MsgType)
    assert not set(MESSAGES) & RAW
    for t, cls in MESSAGES.items():
        assert issubclass(cls, Message), t


@pytest.mark.parametrize("msg_type", sorted(MESSAGES))
def test_protobuf_bodies_round_trip(msg_type: MsgType) -> None:
    cls = MESSAGES[msg_type]
    msg = cls()
    # one field set where the message has one, so the round trip carries data
    for field in cls.DESCRIPTOR.fields:
        if field.type == field.TYPE_INT32 and not field.is_repeated:
            setattr(msg, field.name, 7)
            break
        if field.type == field.TYPE_STRING and not field.is_repeated:
            setattr(msg, field.name, "x")
            break
    frame = encode_msg(msg)
    assert frame == encode_frame(msg_type, msg.SerializeToString())
    back = decode(msg_type, frame, "peer")
    assert isinstance(back, cls) and back == msg
    assert decode_as(cls, msg_type, frame) == msg


def test_raw_frames_are_handed_on_whole() -> None:
    batch = encode_batch_frame(4, 2, b"tuples", count=1)
    assert decode(MsgType.TUPLE_BATCH, batch) is batch
    report = encode_frame(MsgType.METRICS_REPORT, b'{"kind": "stmgr"}')
    assert report[HEADER_SIZE:] == b'{"kind": "stmgr"}'
    assert decode(MsgType.METRICS_REPORT, report) is report


def test_a_body_that_does_not_parse_is_one_error_line() -> None:
    frame = encode_frame(MsgType.REGISTER_STMGR_REQUEST, b"\xff\xff\xff")
    with pytest.raises(WireError) as e:
        decode(MsgType.REGISTER_STMGR_REQUEST, frame, "127.0.0.1:5555")
    assert str(e.value).startswith(
        "REGISTER_STMGR_REQUEST frame from 127.0.0.1:5555 does not parse as RegisterStmgrRequest (3 bytes): ")
    assert str(e.value).endswith("; closing the connection")
    assert "\n" not in str(e.value)
    assert isinstance(e.value, FrameError)


def test_a_type_without_codec_is_refused() -> None:
    with pytest.raises(WireError, match=r"^frame from p has message type 999, which has no codec; closing the "
                                        r"connection$"):
        decode(999, encode_frame(999, b""), "p")


def test_each_class_is_registered_once_so_the_class_is_the_type() -> None:
    assert len(set(MESSAGES.values())) == len(MESSAGES)
    assert {cls: t for t, cls in MESSAGES.items()} == dict(TYPES)


@pytest.mark.parametrize("msg_type", sorted(MESSAGES))
def test_the_typed_encoder_frames_byte_for_byte_as_by_hand(msg_type: MsgType) -> None:
    cls = MESSAGES[msg_type]
    empty = cls()
    assert encode_msg(empty) == encode_frame(msg_type, empty.SerializeToString())
    full = cls()
    for field in cls.DESCRIPTOR.fields:  # every scalar field set, so each one's bytes are compared
        if field.is_repeated or field.type == field.TYPE_MESSAGE:
            continue
        value = {field.TYPE_STRING: "x", field.TYPE_BYTES: b"\x00\xff", field.TYPE_BOOL: True,
                 field.TYPE_DOUBLE: 1.5, field.TYPE_FLOAT: 0.5}.get(field.type, 7)
        setattr(full, field.name, value)
    assert encode_msg(full) == encode_frame(msg_type, full.SerializeToString())
    assert decode(msg_type, encode_msg(full)) == full


def test_an_unregistered_class_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match=r"^InstanceInfo is not a wire message: no message type carries it "):
        encode_msg(pb.InstanceInfo())
