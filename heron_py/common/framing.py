"""Length-prefixed frames, sans-I/O.

Frame = 4-byte big-endian length | 2-byte big-endian message type | payload, where the
length counts the type and payload. The decoder never trusts a length: a frame announcing
more than ``max_frame`` bytes is refused as soon as its 6-byte header is seen, before any
payload is buffered, so a hostile peer cannot make us allocate.
"""

from __future__ import annotations

import enum
import struct

from heron_py.common.frameauth import TAG_SIZE, FrameMac

HEADER = struct.Struct(">IH")
HEADER_SIZE = HEADER.size  # 6
BATCH_HEADER = struct.Struct(">III")  # destination task, source task, number of tuples or records
DEFAULT_MAX_FRAME = 16 * 1024 * 1024


class MsgType(enum.IntEnum):
    SERVER_HELLO = 1
    CLIENT_HELLO = 2
    SERVER_AUTH = 3
    AUTH_FAILED = 4
    # a connection's heartbeat (net.Liveness), tagged like any frame; consumed by the connection
    LINK_PING = 5
    REGISTER_INSTANCE_REQUEST = 10
    REGISTER_INSTANCE_RESPONSE = 11
    NEW_PHYSICAL_PLAN = 12
    INSTANCE_READY = 13
    INSTANCE_METRICS = 14
    STMGR_HELLO = 20
    BACKPRESSURE = 21
    REGISTER_STMGR_REQUEST = 30
    REGISTER_STMGR_RESPONSE = 31
    STMGR_HEARTBEAT = 32
    ADMIN_REQUEST = 40
    ADMIN_RESPONSE = 41
    # body: one JSON object (metrics_manager/store.py documents it), not protobuf
    METRICS_REPORT = 50  # instance/SM -> metrics manager; metrics manager -> TM
    # effectively once (proto messages; see heron_py/checkpoint/)
    START_CHECKPOINT = 60  # TM -> SM -> local spouts
    CHECKPOINT_SAVED = 61  # instance -> SM -> TM
    RESTORE_STATE = 62  # TM -> SM -> every local instance
    STATE_RESTORED = 63  # instance -> SM -> TM (to the SM also the instance's fence)
    START_PROCESSING = 64  # TM -> SM -> every local instance
    RESTORE_FENCE = 65  # SM -> peer SM
    ROLLBACK_REQUEST = 66  # SM -> TM: in-flight data was lost, roll every task back
    ROLLBACK_ANSWER = 67  # TM -> SM: that request was acted on (a restore follows) or moot
    CHECKPOINT_COMMITTED = 68  # TM -> SM -> every local instance: a checkpoint is complete
    # a live rescale (topology_master/rescale.py)
    DRAIN_REQUEST = 70  # TM -> SM: say when the local spouts' tuples in flight are done
    DRAINED = 71  # SM -> TM: they are
    TUPLE_BATCH = 100  # a pickled (rows, values, ids) body, see serialization.py: rows, runs, default-stream values
    ACK_BATCH = 101  # instance -> SM of the root's spout: init/ack/fail records
    ACK_RESULT = 102  # SM -> spout instance: resolved roots
    # a checkpoint marker: a batch header (destination, source, 0) and the 8-byte checkpoint
    # id; routed like a tuple batch, so it stays behind the tuples sent before it
    CKPT_MARKER = 103


_KNOWN_TYPES = frozenset(int(t) for t in MsgType)
# effectively once: the master's commands (to stream managers, passed on to instances) and the
# instances' reports (to stream managers, passed on to the master)
CHECKPOINT_COMMANDS = frozenset((MsgType.START_CHECKPOINT, MsgType.RESTORE_STATE, MsgType.START_PROCESSING,
                                 MsgType.CHECKPOINT_COMMITTED))
CHECKPOINT_REPORTS = frozenset((MsgType.CHECKPOINT_SAVED, MsgType.STATE_RESTORED))


# ACK_BATCH records: kind, root id, value; ACK_RESULT records: outcome, root id. The tracker
# XORs the value of an INIT and of an ACK alike; an emitter sends ACK for the merged XOR of
# every init and ack of one root since its last flush. FAIL ends the root.
ACK_RECORD = struct.Struct(">BQQ")
RESULT_RECORD = struct.Struct(">BQ")
ACK_INIT, ACK_ACK, ACK_FAIL = 1, 2, 3
RESULT_ACKED, RESULT_FAILED, RESULT_TIMED_OUT = 1, 2, 3
BODY_OFFSET = HEADER_SIZE + BATCH_HEADER.size
MARKER_BODY = struct.Struct(">Q")


class FrameError(Exception):
    """A peer sent bytes that are not a valid frame; the connection must be closed."""


class FrameAuthError(FrameError):
    """A frame after the handshake whose tag is wrong: it is not decoded, and the connection
    is aborted (``frameauth`` says what the tag covers)."""


def _type_name(msg_type: int) -> str:
    try:
        return MsgType(msg_type).name
    except ValueError:
        return str(msg_type)


def encode_frame(msg_type: int, payload: bytes) -> bytes:
    return HEADER.pack(len(payload) + 2, msg_type) + payload


def encode_batch_frame(dest_task: int, src_task: int, body: bytes | bytearray, msg_type: int = 100,
                       count: int = 0) -> bytes:
    """A TUPLE_BATCH (or ACK_BATCH / ACK_RESULT) frame: routable (and countable, for drop
    metrics) by its 12-byte batch header without decoding ``body``."""
    head = HEADER.pack(len(body) + 2 + BATCH_HEADER.size, msg_type)
    return head + BATCH_HEADER.pack(dest_task, src_task, count) + body


def frame_type(frame: bytes) -> int:
    """The message type of an encoded frame (header included)."""
    return frame[4] << 8 | frame[5]


def batch_count(frame: bytes) -> int:
    """Number of tuples (or records) in an encoded batch frame."""
    n: int = BATCH_HEADER.unpack_from(frame, HEADER_SIZE)[2]
    return n


def batch_src(frame: bytes) -> int:
    """Source task of an encoded batch frame (header included)."""
    src: int = BATCH_HEADER.unpack_from(frame, HEADER_SIZE)[1]
    return src


def batch_dest(frame: bytes) -> int:
    """Destination task of an encoded TUPLE_BATCH frame (header included)."""
    dest: int = BATCH_HEADER.unpack_from(frame, HEADER_SIZE)[0]
    return dest


class FrameDecoder:
    """Accumulates bytes and yields whole frames as ``(type, frame_bytes)``.

    ``frame_bytes`` is the whole frame including its header, so a router can forward it
    unchanged; the payload starts at ``HEADER_SIZE``.
    """

    def __init__(self, peer: str, max_frame: int = DEFAULT_MAX_FRAME, *, pre_auth_frames: int = 0,
                 pre_auth_max: int = DEFAULT_MAX_FRAME, authenticated: bool = False) -> None:
        self._peer = peer
        # with ``authenticated``, every frame after the pre-auth ones carries a TAG_SIZE tag that
        # ``mac`` checks before the frame is returned; until the connection sets ``mac`` (its
        # handshake done), ``feed`` stops at that boundary and keeps the rest buffered
        self._tagged = authenticated
        self.mac: FrameMac | None = None
        self.failed: FrameAuthError | None = None
        # the first ``pre_auth_frames`` frames (the peer's handshake messages) are held to
        # ``pre_auth_max``: an unauthenticated peer cannot make us buffer megabytes. Counted
        # per frame, not per connection state, because the peer's first post-handshake frame
        # may arrive in the same read as its last handshake frame
        self._pre_left = pre_auth_frames
        self._pre_max = min(pre_auth_max, max_frame)
        # settable: a connection raises it from the pre-auth limit once the peer is
        # authenticated, and to the topology's heron_py.network.max.frame.bytes when known
        self.max_frame = max_frame
        self._buf = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buf)

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        if self.failed is not None:
            raise self.failed
        buf = self._buf
        buf += data
        out: list[tuple[int, bytes]] = []
        pos = 0
        end = len(buf)
        tag = 0
        mac = None
        while end - pos >= HEADER_SIZE:
            if self._tagged and self._pre_left == 0:
                mac = self.mac
                if mac is None:
                    break  # the handshake's last frame came: the keys come next
                tag = TAG_SIZE
            length, msg_type = HEADER.unpack_from(buf, pos)
            limit = self._pre_max if self._pre_left > 0 else self.max_frame
            if length > limit:
                what = " before authenticating" if self._pre_left > 0 else ""
                raise FrameError(
                    f"frame from {self._peer} announces {length} bytes{what}, over the limit of "
                    f"{limit} bytes; closing the connection"
                )
            if length < 2:
                raise FrameError(
                    f"frame from {self._peer} announces {length} bytes; a frame has at least "
                    f"2 (its message type); closing the connection"
                )
            if msg_type not in _KNOWN_TYPES:
                raise FrameError(
                    f"frame from {self._peer} has unknown message type {msg_type}; "
                    f"closing the connection"
                )
            total = 4 + length
            if end - pos < total + tag:
                break
            frame = bytes(buf[pos : pos + total])
            if mac is not None and not mac.check(frame, bytes(buf[pos + total : pos + total + tag])):
                error = FrameAuthError(
                    f"frame {mac.seq} from {self._peer} ({_type_name(msg_type)}, {length} bytes) failed "
                    f"authentication (changed, replayed, reordered or injected); closing the connection"
                )
                self._buf = bytearray()  # this frame and what follows are never decoded
                if not out:
                    raise error
                self.failed = error  # the good frames before it first; the next feed raises
                return out
            out.append((msg_type, frame))
            pos += total + tag
            if self._pre_left > 0:
                self._pre_left -= 1
        if pos:
            del buf[:pos]
        return out


def encode_marker(dest_task: int, src_task: int, checkpoint_id: int) -> bytes:
    """A CKPT_MARKER frame from ``src_task`` to ``dest_task`` for ``checkpoint_id``."""
    return encode_batch_frame(dest_task, src_task, MARKER_BODY.pack(checkpoint_id), MsgType.CKPT_MARKER)


def decode_marker(frame: bytes) -> tuple[int, int]:
    """(source task, checkpoint id) of a CKPT_MARKER frame."""
    if len(frame) != BODY_OFFSET + MARKER_BODY.size:
        raise FrameError(f"checkpoint marker: expected {BODY_OFFSET + MARKER_BODY.size} bytes, found {len(frame)}")
    src: int = BATCH_HEADER.unpack_from(frame, HEADER_SIZE)[1]
    cid: int = MARKER_BODY.unpack_from(frame, BODY_OFFSET)[0]
    return src, cid
