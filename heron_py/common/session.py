"""The sans-I/O session of one framed connection: the handshake on the topology secret, the
frame decoder with its limits, the session keys and the check of each frame's tag. Bytes go
in, a ``Step`` comes out (handshake frames to write, the moment the peer is proven, the frames
to hand on); no sockets, no event loop, no clock. ``net.Connection`` is its asyncio adapter.

``Silence`` is the liveness rule, equally pure: given what moved since the last tick, whether
to send a heartbeat and whether the peer has been silent for too long.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from heron_py.common.frameauth import FrameMac
from heron_py.common.framing import DEFAULT_MAX_FRAME, FrameDecoder, MsgType, encode_frame
from heron_py.common.handshake import ClientHandshake, HandshakeError, PeerIdentity, ServerHandshake
from proto import heron_py_pb2 as pb


@dataclass(frozen=True)
class Opened:
    """The handshake ended: who the peer proved to be, and the key our frames are tagged with."""

    identity: PeerIdentity | None  # the client's identity on a server; None on a client
    peer_role: str  # the client's role on a server, the server's on a client
    send_mac: FrameMac


@dataclass(frozen=True)
class Step:
    """What one ``receive`` produced, in order: handshake replies to write first, then (when
    the handshake ended here) ``opened``, then the frames to hand on. ``more``: bytes after the
    handshake wait in the decoder; call ``receive(b"")`` once ``opened`` is handled."""

    replies: tuple[bytes, ...] = ()
    opened: Opened | None = None
    frames: tuple[tuple[int, bytes], ...] = ()
    more: bool = False


class Session:
    def __init__(self, secret: bytes, *, server_role: str | None, client_role: str = "", client_id: str = "",
                 peer: str = "peer", max_frame: int = DEFAULT_MAX_FRAME, pre_auth_max: int = DEFAULT_MAX_FRAME,
                 nonce: Callable[[int], bytes] = os.urandom) -> None:
        self.peer = peer
        self._secret = secret
        self._server_role = server_role
        self._pre_auth_max = pre_auth_max
        self.max_frame = max_frame
        self._client = (client_role, client_id)
        self._nonce = nonce
        self.identity: PeerIdentity | None = None
        self.is_open = False
        self._server_hs: ServerHandshake | None = None
        self._client_hs: ClientHandshake | None = None
        self.rename(peer)

    def _new_decoder(self) -> FrameDecoder:
        # the peer's handshake frames: ClientHello to a server; ServerHello and ServerAuth to a client
        return FrameDecoder(self.peer, self.max_frame, pre_auth_frames=1 if self._server_hs is not None else 2,
                            pre_auth_max=self._pre_auth_max, authenticated=True)

    def rename(self, peer: str) -> None:
        """The peer's address, known once connected (before any byte came): named in errors."""
        self.peer = peer
        if self._server_role is not None:
            self._server_hs = ServerHandshake(self._secret, self._server_role, peer, self._nonce)
        else:
            self._client_hs = ClientHandshake(self._secret, *self._client, peer, self._nonce)
        self.decoder = self._new_decoder()

    def hello(self) -> bytes:
        """The server's first frame (a server speaks first)."""
        assert self._server_hs is not None, "only a server says hello"
        return self._server_hs.start()

    def refusal(self) -> bytes | None:
        """What a server answers a failed handshake with (a client answers nothing)."""
        if self._server_hs is None:
            return None
        return encode_frame(MsgType.AUTH_FAILED, pb.AuthFailed(reason="authentication failed").SerializeToString())

    def set_max_frame(self, max_frame: int) -> None:
        self.max_frame = max_frame
        self.decoder.max_frame = max_frame

    def receive(self, data: bytes) -> Step:
        """Bytes from the peer. Raises ``HandshakeError`` (a failed handshake: answer ``refusal()``
        and close), ``FrameAuthError`` (a bad tag: abort) or ``FrameError`` (a bad frame: close).
        Once open, the connection may feed ``decoder`` directly (the hot path): same result."""
        frames = self.decoder.feed(data)
        if self.is_open:
            return Step(frames=tuple(frames))
        replies: list[bytes] = []
        for i, (msg_type, frame) in enumerate(frames):
            reply = self._handshake_step(msg_type, frame)
            if reply is not None:
                replies.append(reply)
            if self.is_open:
                # the decoder stops at the handshake's end until it has the key: nothing follows here
                assert i == len(frames) - 1
                return Step(replies=tuple(replies), opened=self._open(), more=self.decoder.buffered > 0)
        return Step(replies=tuple(replies))

    def _handshake_step(self, msg_type: int, frame: bytes) -> bytes | None:
        if self._server_hs is not None:
            reply = self._server_hs.on_frame(msg_type, frame)
            self.identity = self._server_hs.identity
            self.is_open = self._server_hs.keys is not None
            return reply
        assert self._client_hs is not None
        out = self._client_hs.on_frame(msg_type, frame)
        self.is_open = self._client_hs.keys is not None
        return out

    def _open(self) -> Opened:
        hs = self._server_hs if self._server_hs is not None else self._client_hs
        assert hs is not None and hs.keys is not None
        self.decoder.mac = FrameMac(hs.keys.recv)
        role = self.identity.role if self.identity is not None else \
            self._client_hs.server_role if self._client_hs is not None else ""
        return Opened(identity=self.identity, peer_role=role, send_mac=FrameMac(hs.keys.send))


@dataclass(frozen=True)
class Verdict:
    ping: bool  # nothing sent for an interval: send a heartbeat
    abort: bool  # nothing came for the timeout while reading: the peer is frozen or gone
    silent_s: float


class Silence:
    """The liveness rule, ticked every ``interval_s``: reads paused by our own backpressure are
    not the peer's silence, and a heartbeat goes out only when we sent nothing ourselves."""

    def __init__(self, interval_s: float, timeout_s: float, bytes_in: int, bytes_out: int) -> None:
        self._interval = interval_s
        self._timeout = timeout_s
        self._seen = (bytes_in, bytes_out)
        self.silent_s = 0.0

    def tick(self, bytes_in: int, bytes_out: int, *, reading: bool, writing_paused: bool) -> Verdict:
        seen_in, seen_out = self._seen
        if bytes_in != seen_in or not reading:
            self.silent_s = 0.0
        else:
            self.silent_s += self._interval
            if self.silent_s >= self._timeout:
                return Verdict(ping=False, abort=True, silent_s=self.silent_s)
        return Verdict(ping=bytes_out == seen_out and not writing_paused, abort=False, silent_s=self.silent_s)

    def mark(self, bytes_in: int, bytes_out: int) -> None:
        """What had moved at the end of a tick (a heartbeat sent included)."""
        self._seen = (bytes_in, bytes_out)


__all__ = ["HandshakeError", "Opened", "Session", "Silence", "Step", "Verdict"]
