"""asyncio glue for framed, authenticated connections.

The protocol logic lives in ``framing`` and ``handshake`` (sans-I/O); this module only moves
bytes. A ``Connection`` runs the handshake first and hands frames to its handler only once
the peer has proven the secret. Any malformed frame or failed handshake closes that one
connection, is logged once with the reason, and is counted; the daemon keeps serving.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import struct
from collections.abc import Callable, Iterable
from typing import Protocol

from google.protobuf.message import DecodeError

from heron_py.common.framing import DEFAULT_MAX_FRAME, HEADER_SIZE, FrameDecoder, FrameError, MsgType, encode_frame
from heron_py.common.handshake import ClientHandshake, HandshakeError, PeerIdentity, ServerHandshake
from proto import heron_py_pb2 as pb


def _type_name(msg_type: int) -> str:
    try:
        return MsgType(msg_type).name
    except ValueError:
        return str(msg_type)


class ConnState(enum.Enum):
    HANDSHAKE = "handshake"
    OPEN = "open"
    CLOSED = "closed"


class FrameHandler(Protocol):
    def on_open(self, conn: Connection) -> None: ...
    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None: ...
    def on_close(self, conn: Connection) -> None: ...
    # the write buffer crossed the high watermark (paused=True) or fell below the low one
    def on_writing(self, conn: Connection, paused: bool) -> None: ...


class BaseHandler:
    """No-op defaults of FrameHandler; handlers override what they use."""

    def on_open(self, conn: Connection) -> None:
        pass

    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        pass

    def on_close(self, conn: Connection) -> None:
        pass

    def on_writing(self, conn: Connection, paused: bool) -> None:
        pass


class Counters:
    """Connection-level fault counters a daemon exports (refused peers, bad frames)."""

    def __init__(self) -> None:
        self.auth_failures = 0
        self.bad_frames = 0


class Connection(asyncio.Protocol):
    def __init__(
        self,
        handler: FrameHandler,
        secret: bytes,
        *,
        server_role: str | None = None,  # set on the accepting side
        client_role: str = "",
        client_id: str = "",
        peer_name: str = "peer",
        max_frame: int = DEFAULT_MAX_FRAME,
        log: logging.Logger,
        counters: Counters | None = None,
    ) -> None:
        self.handler = handler
        self.state = ConnState.HANDSHAKE
        # per-connection traffic, for the metrics manager (one add per read or write call)
        self.bytes_in = 0
        self.bytes_out = 0
        self.identity: PeerIdentity | None = None
        self.peer_name = peer_name
        self.transport: asyncio.Transport | None = None
        self.authenticated: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._secret = secret
        self._server_role = server_role
        self._max_frame = max_frame
        self._log = log
        self._counters = counters or Counters()
        self._decoder = FrameDecoder(peer_name, max_frame)
        self._server_hs: ServerHandshake | None = None
        self._client_hs: ClientHandshake | None = None
        if server_role is None:
            self._client_hs = ClientHandshake(secret, client_role, client_id, peer_name)
        self.context: object = None  # what the handler attaches (e.g. task id)
        self.writing_paused = False
        self.close_reason: str | None = None  # why we closed it (None: open, or the peer closed)

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses but have its methods
        tr: asyncio.Transport = transport  # type: ignore[assignment]
        self.transport = tr
        peer = tr.get_extra_info("peername")
        if peer and self.peer_name == "peer":
            self.peer_name = f"{peer[0]}:{peer[1]}"
            self._decoder = FrameDecoder(self.peer_name, self._max_frame)
        if self._server_role is not None:
            self._server_hs = ServerHandshake(self._secret, self._server_role, self.peer_name)
            tr.write(self._server_hs.start())

    def data_received(self, data: bytes) -> None:
        self.bytes_in += len(data)
        try:
            frames = self._decoder.feed(data)
        except FrameError as e:
            self._counters.bad_frames += 1
            self._log.warning("%s", e)
            self.close(f"bad frame: {e}")
            return
        for msg_type, frame in frames:
            if self.state is ConnState.OPEN:
                try:
                    self.handler.on_frame(self, msg_type, frame)
                except (DecodeError, struct.error) as e:
                    self._counters.bad_frames += 1
                    self._log.warning("dropping connection: %s sent a %s frame that does not parse: %s",
                                      self.peer_name, _type_name(msg_type), e)
                    self.close(f"unparsable {_type_name(msg_type)} frame")
                    return
            elif self.state is ConnState.HANDSHAKE:
                self._handshake_step(msg_type, frame)
            else:
                return

    def _handshake_step(self, msg_type: int, frame: bytes) -> None:
        assert self.transport is not None
        try:
            if self._server_hs is not None:
                self.transport.write(self._server_hs.on_frame(msg_type, frame))
                self.identity = self._server_hs.identity
            else:
                assert self._client_hs is not None
                reply = self._client_hs.on_frame(msg_type, frame)
                if reply is not None:
                    self.transport.write(reply)
                    return
        except HandshakeError as e:
            self._counters.auth_failures += 1
            self._log.warning("dropping connection: %s", e)
            if self._server_hs is not None:
                self.transport.write(encode_frame(MsgType.AUTH_FAILED,
                                                  pb.AuthFailed(reason="authentication failed").SerializeToString()))
            if not self.authenticated.done():
                self.authenticated.set_exception(e)
            self.close(f"handshake failed: {e}")
            return
        self.state = ConnState.OPEN
        if not self.authenticated.done():
            self.authenticated.set_result(None)
        self.handler.on_open(self)

    def connection_lost(self, exc: Exception | None) -> None:
        was_open = self.state is ConnState.OPEN
        self.state = ConnState.CLOSED
        if not self.authenticated.done():
            self.authenticated.set_exception(ConnectionError(f"connection to {self.peer_name} lost"))
        if was_open:
            self.handler.on_close(self)

    # the transport calls these when its write buffer crosses the limits set with
    # set_write_limits (high on the way up, low on the way down): the watermarks
    def pause_writing(self) -> None:
        self.writing_paused = True
        self.handler.on_writing(self, True)

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.handler.on_writing(self, False)

    def set_write_limits(self, high: int, low: int) -> None:
        if self.transport is not None:
            self.transport.set_write_buffer_limits(high=high, low=low)

    # API
    @property
    def is_open(self) -> bool:
        return self.state is ConnState.OPEN

    def send(self, frame: bytes) -> None:
        if self.state is ConnState.OPEN and self.transport is not None:
            self.bytes_out += len(frame)
            self.transport.write(frame)

    def send_many(self, frames: Iterable[bytes]) -> None:
        """Writes several frames with one call (a flushed batch list, held frames)."""
        if self.state is ConnState.OPEN and self.transport is not None:
            frames = frames if isinstance(frames, (list, tuple)) else list(frames)
            self.bytes_out += sum(map(len, frames))
            self.transport.writelines(frames)

    def send_msg(self, msg_type: MsgType, msg: object) -> None:
        self.send(encode_frame(msg_type, msg.SerializeToString()))  # type: ignore[attr-defined]

    def write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def pause_reading(self) -> None:
        if self.transport is not None and self.transport.is_reading():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_reading() and not self.transport.is_closing():
            self.transport.resume_reading()

    def close(self, reason: str = "") -> None:
        """Idempotent; the first reason given is kept (and logged at debug level)."""
        if self.close_reason is None:
            self.close_reason = reason or "closed"
            if reason:
                self._log.debug("closing the connection to %s: %s", self.peer_name, reason)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()


async def connect(
    host: str,
    port: int,
    handler: FrameHandler,
    secret: bytes,
    *,
    role: str,
    peer_id: str,
    log: logging.Logger,
    timeout: float = 5.0,
    max_frame: int = DEFAULT_MAX_FRAME,
) -> Connection:
    """Opens a TCP connection and completes the handshake; raises on failure."""
    loop = asyncio.get_running_loop()
    peer = f"{host}:{port}"
    _, conn = await asyncio.wait_for(
        loop.create_connection(
            lambda: Connection(handler, secret, client_role=role, client_id=peer_id, peer_name=peer,
                               max_frame=max_frame, log=log),
            host, port),
        timeout)
    try:
        await asyncio.wait_for(conn.authenticated, timeout)
    except BaseException:
        conn.close("handshake did not complete")
        raise
    return conn


async def serve(
    host: str,
    port: int,
    handler_factory: Callable[[], FrameHandler],
    secret: bytes,
    *,
    role: str,
    log: logging.Logger,
    counters: Counters,
    max_frame: int = DEFAULT_MAX_FRAME,
) -> asyncio.Server:
    loop = asyncio.get_running_loop()
    return await loop.create_server(
        lambda: Connection(handler_factory(), secret, server_role=role, max_frame=max_frame,
                           log=log, counters=counters),
        host, port)


def parse(msg: object, frame: bytes) -> None:
    """Parses a protobuf control message from a frame (payload after the header)."""
    msg.ParseFromString(frame[HEADER_SIZE:])  # type: ignore[attr-defined]
