"""The sans-I/O session of one framed connection: the handshake on the topology secret, the
frame decoder with its limits, the session keys and the check of each frame's tag. Bytes go
in, a ``Step`` comes out (handshake frames to write, the moment the peer is proven, the frames
to hand on); no sockets, no event loop. ``net.Connection`` is its asyncio adapter.

``Silence`` is the liveness rule, equally pure (its clock injected): given what moved since the
last tick, whether to send a heartbeat and whether the peer has been silent for too long.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from heron_py.common.frameauth import FrameMac
from heron_py.common.framing import DEFAULT_MAX_FRAME, FrameDecoder
from heron_py.common.handshake import ClientHandshake, HandshakeError, PeerIdentity, ServerHandshake
from heron_py.common.wire import encode_msg
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
                 nonce: Callable[[int], bytes] = os.urandom, server_id: str = "",
                 expect: PeerIdentity | None = None) -> None:
        """A server's session names ``server_role`` and ``server_id``; a client's may ``expect`` the
        server's role and id (``handshake.ClientHandshake``)."""
        self.peer = peer
        self._secret = secret
        self._server_role = server_role
        self._server_id = server_id
        self._expect = expect
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
            self._server_hs = ServerHandshake(self._secret, self._server_role, peer, self._nonce,
                                              server_id=self._server_id)
        else:
            self._client_hs = ClientHandshake(self._secret, *self._client, peer, self._nonce, expect=self._expect)
        self.decoder = self._new_decoder()

    def hello(self) -> bytes:
        """The server's first frame (a server speaks first)."""
        assert self._server_hs is not None, "only a server says hello"
        return self._server_hs.start()

    def refusal(self) -> bytes | None:
        """What a server answers a failed handshake with (a client answers nothing)."""
        if self._server_hs is None:
            return None
        return encode_msg(pb.AuthFailed(reason="authentication failed"))

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
    ping: bool  # nothing sent since the last tick: send a heartbeat
    abort: bool  # nothing came for the timeout, and we could have read it: the peer is frozen or gone
    silent_s: float  # seconds since the tick that last saw bytes from the peer


class Silence:
    """The liveness rule, ticked about every ``interval_s`` with the connection's byte counts
    (compared at each tick, so the hot path pays nothing). Silence is elapsed time on ``clock``
    (monotonic), never a count of ticks: under load the ticks come late, and counting them
    stretched a 10 s timeout well past 10 s.

    The peer has been silent since the last tick that saw new bytes from it (the open, at
    first). Reading paused by us does not reset that: a peer that sent nothing meanwhile was
    silent meanwhile. But while we do not read, what it sends waits in the kernel, unseen, so
    silence is judged only at a tick before which we could read for a whole interval: reading
    at the previous tick and ever since, with no pause in between. Everything the peer sent up
    to the previous tick, during a pause included, has then been read (the event loop polls the
    socket between two ticks), so a silence still as long as the timeout is the peer's own. A
    peer is therefore aborted at the first tick that is at least one interval into our reading
    and at least ``timeout_s`` after its last bytes; while we keep reading paused it is not
    aborted (TCP keepalive and its executor's liveness probe still end a frozen or vanished
    process). A heartbeat goes out only when we sent nothing since the last tick."""

    def __init__(self, interval_s: float, timeout_s: float, bytes_in: int, bytes_out: int, *,
                 clock: Callable[[], float] = time.monotonic, reading: bool = True) -> None:
        self._interval = interval_s
        self._timeout = timeout_s
        self._clock = clock
        self._seen = (bytes_in, bytes_out)
        now = clock()
        self._heard = now  # the last tick that saw bytes from the peer
        self._tick = now  # the last tick
        self._reading_since: float | None = now if reading else None  # None: paused now
        self.silent_s = 0.0

    def paused(self) -> None:
        """We stopped reading (our own backpressure)."""
        self._reading_since = None

    def resumed(self) -> None:
        """We read again: what the peer sent meanwhile is read from now on."""
        if self._reading_since is None:
            self._reading_since = self._clock()

    def tick(self, bytes_in: int, bytes_out: int, *, reading: bool, writing_paused: bool) -> Verdict:
        """``reading``: whether the transport reads now (a pause not reported by ``paused``
        counts from this tick)."""
        now = self._clock()
        seen_in, seen_out = self._seen
        if bytes_in != seen_in:
            self._heard = now
        if not reading:
            self._reading_since = None
        elif self._reading_since is None:
            self._reading_since = now
        judged = self._reading_since is not None and self._reading_since <= self._tick
        self._tick = now
        self.silent_s = now - self._heard
        if judged and self.silent_s >= self._timeout:
            return Verdict(ping=False, abort=True, silent_s=self.silent_s)
        return Verdict(ping=bytes_out == seen_out and not writing_paused, abort=False, silent_s=self.silent_s)

    def mark(self, bytes_in: int, bytes_out: int) -> None:
        """What had moved at the end of a tick (a heartbeat sent included)."""
        self._seen = (bytes_in, bytes_out)


__all__ = ["HandshakeError", "Opened", "Session", "Silence", "Step", "Verdict"]
