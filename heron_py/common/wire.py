"""The wire's message bodies, in one place: which protobuf class each message type carries,
which types stay raw bytes, and the one decoder and encoder.

Every message type has exactly one codec: a protobuf class in ``MESSAGES`` or a place in
``RAW``. Raw frames are handed on whole (header included): batch frames are routed on their
12-byte header and forwarded as the same bytes, a metrics report is one JSON object, a
heartbeat has no body. ``decode`` is the only place a protobuf body is parsed after the
handshake, so a body that does not parse is refused with one line everywhere: which type,
from which peer, what failed. Each protobuf class is registered under one type only, so a
message's class determines its type: ``encode_msg(msg)`` is the one protobuf encoder, and a
sender never names a type.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from heron_py.common.framing import HEADER_SIZE, FrameError, MsgType, encode_frame
from proto import heron_py_pb2 as pb

M = TypeVar("M", bound=Message)

# the AdminRequest command of a live rescale (the CLI's update; topology_master/rescaler.py)
ADMIN_RESCALE = "rescale"

MESSAGES: Mapping[MsgType, type[Message]] = MappingProxyType({
    MsgType.SERVER_HELLO: pb.ServerHello,
    MsgType.CLIENT_HELLO: pb.ClientHello,
    MsgType.SERVER_AUTH: pb.ServerAuth,
    MsgType.AUTH_FAILED: pb.AuthFailed,
    MsgType.REGISTER_INSTANCE_REQUEST: pb.RegisterInstanceRequest,
    MsgType.REGISTER_INSTANCE_RESPONSE: pb.RegisterInstanceResponse,
    MsgType.NEW_PHYSICAL_PLAN: pb.NewPhysicalPlan,
    MsgType.INSTANCE_READY: pb.InstanceReady,
    MsgType.INSTANCE_METRICS: pb.InstanceMetrics,
    MsgType.STMGR_HELLO: pb.StmgrHello,
    MsgType.BACKPRESSURE: pb.BackPressure,
    MsgType.REGISTER_STMGR_REQUEST: pb.RegisterStmgrRequest,
    MsgType.REGISTER_STMGR_RESPONSE: pb.RegisterStmgrResponse,
    MsgType.STMGR_HEARTBEAT: pb.StmgrHeartbeat,
    MsgType.ADMIN_REQUEST: pb.AdminRequest,
    MsgType.ADMIN_RESPONSE: pb.AdminResponse,
    MsgType.START_CHECKPOINT: pb.StartCheckpoint,
    MsgType.CHECKPOINT_SAVED: pb.CheckpointSaved,
    MsgType.RESTORE_STATE: pb.RestoreState,
    MsgType.STATE_RESTORED: pb.StateRestored,
    MsgType.START_PROCESSING: pb.StartProcessing,
    MsgType.RESTORE_FENCE: pb.RestoreFence,
    MsgType.ROLLBACK_REQUEST: pb.RollbackRequest,
    MsgType.ROLLBACK_ANSWER: pb.RollbackAnswer,
    MsgType.CHECKPOINT_COMMITTED: pb.CheckpointCommitted,
    MsgType.DRAIN_REQUEST: pb.DrainRequest,
    MsgType.DRAINED: pb.Drained,
})

# handed on as the whole frame: never parsed here (batches are routed on their header)
RAW: frozenset[MsgType] = frozenset((
    MsgType.LINK_PING,  # no body: its arrival is the point
    MsgType.METRICS_REPORT,  # one JSON object (metrics_manager/store.py)
    MsgType.TUPLE_BATCH,
    MsgType.ACK_BATCH,
    MsgType.ACK_RESULT,
    MsgType.CKPT_MARKER,
))

_BY_INT: dict[int, type[Message]] = {int(t): cls for t, cls in MESSAGES.items()}  # frames carry ints

# each class is registered once, so a message's class is its type: senders name the message,
# never the type (``encode_msg``, ``net.Connection.send_msg``)
TYPES: Mapping[type[Message], MsgType] = MappingProxyType({cls: t for t, cls in MESSAGES.items()})
if len(TYPES) != len(MESSAGES):
    raise RuntimeError("wire.MESSAGES registers a protobuf class under two message types; each class needs its own")


class WireError(FrameError):
    """A frame whose body does not parse as its type's message: the connection is closed."""


def _name(msg_type: int) -> str:
    try:
        return MsgType(msg_type).name
    except ValueError:
        return str(msg_type)


def decode(msg_type: int, frame: bytes, peer: str = "a peer") -> Message | bytes:
    """The message a frame carries (``frame`` is the whole frame, header included): a new
    protobuf message for a ``MESSAGES`` type, the frame itself for a ``RAW`` one."""
    cls = _BY_INT.get(msg_type)
    if cls is None:
        if msg_type in RAW:
            return frame
        raise WireError(f"frame from {peer} has message type {msg_type}, which has no codec; closing the connection")
    return decode_as(cls, msg_type, frame, peer)


def decode_as(cls: type[M], msg_type: int, frame: bytes, peer: str = "a peer") -> M:
    """Like ``decode``, typed: the caller names the class ``MESSAGES`` gives ``msg_type``."""
    msg = cls()
    try:
        msg.ParseFromString(frame[HEADER_SIZE:])
    except DecodeError as e:
        raise WireError(f"{_name(msg_type)} frame from {peer} does not parse as {cls.__name__} "
                        f"({len(frame) - HEADER_SIZE} bytes): {e}; closing the connection") from e
    return msg


def encode_msg(msg: Message) -> bytes:
    """The frame of a protobuf message, its type given by its class (``TYPES``); a class not in
    ``MESSAGES`` is a programming error. Raw frames have their own encoders (framing.py)."""
    msg_type = TYPES.get(type(msg))
    if msg_type is None:
        raise TypeError(f"{type(msg).__name__} is not a wire message: no message type carries it "
                        f"(heron_py/common/wire.py MESSAGES)")
    return encode_frame(msg_type, msg.SerializeToString())
