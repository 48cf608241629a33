"""asyncio glue for framed, authenticated connections.

The protocol logic lives in ``framing`` and ``handshake`` (sans-I/O); this module only moves
bytes. A ``Connection`` runs the handshake first and hands frames to its handler only once
the peer has proven the secret. Any malformed frame or failed handshake closes that one
connection, is logged once with the reason, and is counted; the daemon keeps serving.

TLS (optional: ``serve(ssl=...)``, ``connect(ssl=..., server_hostname=...)``, contexts from
``heron_py.common.tls``) wraps the connection; the handshake on the secret still runs inside
it. A failed TLS handshake (a bad certificate, a plain TCP peer on a TLS port) is handled
like a failed secret handshake: that one connection is closed, the failure is logged once with
the peer and the reason and counted in ``Counters.auth_failures``. The server accepts plain TCP
and upgrades each connection with ``loop.start_tls`` because asyncio and uvloop, given
``create_server(ssl=...)``, drop a connection whose TLS handshake fails without telling the
protocol (its ``connection_made``/``connection_lost`` are never called), so such a failure
could be neither counted nor logged. A client uses ``create_connection(ssl=...)``, which
raises the failure to the caller.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import ssl as _ssl
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from google.protobuf.message import DecodeError, Message

from heron_py.common.config import HeartbeatConfig
from heron_py.common.frameauth import TAG_SIZE, FrameMac
from heron_py.common.framing import (
    DEFAULT_MAX_FRAME,
    FrameAuthError,
    FrameError,
    MsgType,
    encode_frame,
)
from heron_py.common.guard import DEFAULT_LIMITS, Admission, GuardLimits, PortGuard, RateLimitedLog
from heron_py.common.handshake import HandshakeError, PeerIdentity
from heron_py.common.session import Session, Silence, Step
from heron_py.common.wire import MESSAGES, RAW, WireError, decode_as, encode_msg


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


M = TypeVar("M", bound=Message)
# a route's handler: the connection and the whole frame (decoded by the route when typed)
FrameFn = Callable[["Connection", bytes], None]


@dataclass(frozen=True)
class Route:
    """One message a peer of one role may send: its handler takes the whole frame."""

    role: str
    msg_type: MsgType
    fn: FrameFn


def on(role: str, msg_type: MsgType, cls: type[M], fn: Callable[[Connection, M], None]) -> Route:
    """A protobuf message ``role`` may send, decoded (``wire.decode_as``) before ``fn`` sees it.
    ``cls`` must be the class ``wire.MESSAGES`` gives the type: checked once, at server start."""
    if MESSAGES.get(msg_type) is not cls:
        raise TypeError(f"route {role}/{msg_type.name}: the wire carries {MESSAGES.get(msg_type)}, not {cls.__name__}")

    def decoded(conn: Connection, frame: bytes) -> None:
        fn(conn, decode_as(cls, msg_type, frame, conn.peer_name))

    return Route(role, msg_type, decoded)


def on_raw(role: str, msg_type: MsgType, fn: FrameFn) -> Route:
    """A raw message (``wire.RAW``: batches, markers, reports) ``role`` may send: ``fn`` gets
    the frame as it came, with no decoding (the hot path: one dict lookup, then ``fn``)."""
    if msg_type not in RAW:
        raise TypeError(f"route {role}/{msg_type.name}: not a raw message type; use on() with its class")
    return Route(role, msg_type, fn)


def relay(role: str, msg_type: MsgType, fn: FrameFn) -> Route:
    """A protobuf message ``role`` may send that this endpoint passes on as it came (a stream
    manager relays an instance's CheckpointSaved to the master): not decoded here; ``fn`` gets
    the frame and decodes what it checks."""
    if msg_type not in MESSAGES:
        raise TypeError(f"route {role}/{msg_type.name}: a raw type; use on_raw()")
    return Route(role, msg_type, fn)


class Routes:
    """What each peer role may send to one endpoint, built once when it starts (Heron's stream
    manager installs its typed handlers per server the same way). A connection picks its
    role's table when its handshake ends; a frame whose type is not in it is refused
    generically: counted (``Counters.bad_frame_role``, ``__bad-frames/role``), logged at a
    bounded rate and the connection closed."""

    def __init__(self, endpoint: str, routes: Iterable[Route]) -> None:
        self.endpoint = endpoint  # named in the refusal's log line ("stmgr", "tmanager", ...)
        tables: dict[str, dict[int, FrameFn]] = {}
        for r in routes:
            table = tables.setdefault(r.role, {})
            if r.msg_type in table:
                raise ValueError(f"routes of {endpoint}: {r.role}/{r.msg_type.name} routed twice")
            table[int(r.msg_type)] = r.fn
        self._tables = tables

    def table(self, role: str) -> dict[int, FrameFn]:
        """The role's handlers by message type (empty for a role that may send nothing)."""
        return self._tables.get(role, {})


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


class Routed(BaseHandler):
    """A connecting side's handler whose frames go by ``routes`` (chosen by the server's
    proven role); subclasses that override ``on_open`` call it first."""

    def __init__(self, routes: Routes) -> None:
        self.routes = routes

    def on_open(self, conn: Connection) -> None:
        conn.use_routes(self.routes)


# a connection's heartbeats: the topology's heron_py.network.heartbeat.* keys, one frozen value
# per daemon (config.HeartbeatConfig: the ping after an interval with nothing sent, the abort of
# a peer silent for the timeout)
Liveness = HeartbeatConfig


DEFAULT_LIVENESS = Liveness()
_PING = encode_frame(MsgType.LINK_PING, b"")


def set_tcp_keepalive(transport: asyncio.BaseTransport, idle_s: int = 10, interval_s: int = 5, count: int = 3) -> None:
    """Kernel keepalives on a TCP socket as well: they also end a connection whose process is
    gone with its host, when our own heartbeats cannot run (the process is frozen)."""
    import socket

    sock = transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if hasattr(socket, "TCP_KEEPIDLE"):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, idle_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, interval_s)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, count)
    except OSError:
        pass  # a socket that refuses the option keeps our heartbeats


_LIMITED: dict[str, RateLimitedLog] = {}


def _limited_log(log: logging.Logger) -> RateLimitedLog:
    """One rate-limited log per logger, for failures on connecting sides (no port to own one)."""
    limited = _LIMITED.get(log.name)
    if limited is None:
        limited = _LIMITED[log.name] = RateLimitedLog(log)
    return limited


class Counters:
    """Connection-level fault counters a daemon exports (refused peers, bad frames)."""

    def __init__(self) -> None:
        self.auth_failures = 0
        self.bad_frames = 0
        self.bad_frame_auth = 0  # frames after the handshake whose tag was wrong (__bad-frames/auth)
        self.bad_frame_source = 0  # batches from a connection whose role or task may not send them
        self.bad_frame_role = 0  # a message type the peer's role may not send here (Routes; __bad-frames/role)
        self.silent_peers = 0  # connections aborted for sending nothing within the liveness timeout
        self.shed = 0  # closed at accept: the port's connection caps were reached
        self.evicted = 0  # aborted in their handshake to make room for a newer connection
        self.handshake_timeouts = 0  # closed for not finishing the handshake in time


# OpenSSL's reasons when the peer's first bytes are not TLS (a plain TCP peer)
_NOT_TLS = frozenset({"WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "HTTPS_PROXY_REQUEST",
                      "PACKET_LENGTH_TOO_LONG", "UNKNOWN_PROTOCOL", "UNEXPECTED_RECORD",
                      "UNEXPECTED_EOF_WHILE_READING"})


def tls_failure_reason(exc: BaseException) -> str:
    """A TLS failure in words, for the log and for errors raised to callers."""
    if isinstance(exc, _ssl.SSLCertVerificationError):
        return f"certificate verify failed: {exc.verify_message} (the peer's certificate is not this topology's)"
    if isinstance(exc, _ssl.SSLError):
        reason = exc.reason or ""
        if reason in _NOT_TLS:
            return f"the peer does not speak TLS (plain TCP?): {reason.lower().replace('_', ' ')}"
        if "ALERT" in reason:
            return f"the peer refused the TLS handshake: {reason.lower().replace('_', ' ')}"
        return f"TLS error: {reason.lower().replace('_', ' ') or exc}"
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):
        return "the TLS handshake timed out"
    if isinstance(exc, ConnectionAbortedError):
        return f"TLS handshake aborted: {exc}"
    # a peer that refuses our certificate may just close; so does a plain TCP peer that gives up
    detail = f": {exc}" if str(exc) else ""
    return f"the peer closed the connection during the TLS handshake ({type(exc).__name__}{detail})"


class Connection(asyncio.Protocol):
    def __init__(
        self,
        handler: FrameHandler,
        secret: bytes,
        *,
        server_role: str | None = None,  # set on the accepting side
        client_role: str = "", client_id: str = "",  # what a client proves
        server_id: str = "",  # what a server proves with its role (a container's id)
        expect: PeerIdentity | None = None,  # the server a client means to reach, any other refused
        peer_name: str = "peer",
        max_frame: int = DEFAULT_MAX_FRAME,
        log: logging.Logger,
        counters: Counters | None = None,
        tls: _ssl.SSLContext | None = None,
        tls_handshake_timeout: float = 10.0,
        guard: PortGuard | None = None,
        fail_log: RateLimitedLog | None = None,
        liveness: Liveness = DEFAULT_LIVENESS,
        routes: Routes | None = None,
    ) -> None:
        """``routes``: what each peer role may send, by message type; without it every frame
        goes to ``handler.on_frame``.
        ``guard`` (accepting side): the port's caps and pre-auth limits (``heron_py.common.guard``);
        ``fail_log``: the port's rate-limited log of failed handshakes.
        ``tls``: on the accepting side, the context to upgrade the accepted plain connection
        with before the handshake on the secret; on the connecting side, the context
        ``create_connection`` used (the transport is TLS already)."""
        self.handler = handler
        self.state = ConnState.HANDSHAKE
        # per-connection traffic, for the metrics manager (one add per read or write call)
        self.bytes_in = 0
        self.bytes_out = 0
        self.identity: PeerIdentity | None = None
        # the peer's proven role once open: the client's on a server, the server's on a client
        self.peer_role = ""
        self._routes = routes
        self._route: dict[int, FrameFn] | None = None  # the peer role's table, once open
        self.peer_name = peer_name
        self.transport: asyncio.Transport | None = None
        self.authenticated: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._secret = secret
        self._server_role = server_role
        self._max_frame = max_frame
        self._log = log
        self._counters = counters or Counters()
        self._guard = guard
        self._limits = guard.limits if guard is not None else GuardLimits()
        self._fail_log = fail_log
        self._admitted = False  # counted by the guard: released once, on connection_lost
        self._source = ""  # the peer's address, for the guard
        self._deadline: asyncio.TimerHandle | None = None
        # the protocol (handshake, decoder, limits, keys) is the sans-I/O session; this class moves bytes
        self.session = Session(secret, server_role=server_role, client_role=client_role, client_id=client_id,
                               peer=peer_name, max_frame=max_frame, pre_auth_max=self._limits.pre_auth_max_frame,
                               server_id=server_id, expect=expect)
        self._decoder = self.session.decoder  # fed directly once open: the hot path
        self.context: object = None  # what the handler attaches (e.g. task id)
        self.writing_paused = False
        self.close_reason: str | None = None  # why we closed it (None: open, or the peer closed)
        self._tls = tls
        self._tls_timeout = tls_handshake_timeout
        self._tls_pending = tls is not None and server_role is not None  # accepted, not upgraded yet
        self._tls_task: asyncio.Task[None] | None = None
        self._tls_failed = False
        self._tls_early = bytearray()
        # frames sent in one turn of the event loop go out in one writelines at its end: a
        # stream manager forwards many frames per socket read, and a write each was a syscall
        # each (the largest cost of the spout's stream manager with acking on)
        self._loop = asyncio.get_running_loop()
        self._out: list[bytes] = []
        self._out_bytes = 0
        # per-frame tags once open (frameauth): ours on what we send; the decoder checks the peer's
        self._tx: FrameMac | None = None
        self._liveness = liveness
        self._live_timer: asyncio.TimerHandle | None = None
        self._silence: Silence | None = None  # the liveness rule, once open

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses but have its methods
        tr: asyncio.Transport = transport  # type: ignore[assignment]
        self.transport = tr
        peer = tr.get_extra_info("peername")
        # the guard shares the handshake slots fairly between source addresses
        self._source = str(peer[0]) if isinstance(peer, tuple) and peer else self.peer_name
        if peer and self.peer_name == "peer":
            self.peer_name = f"{peer[0]}:{peer[1]}"
            self.session.rename(self.peer_name)
            self._decoder = self.session.decoder
        if self._server_role is not None and not self._admit(tr):
            return
        if self._tls_pending:
            # no byte may reach data_received before start_tls takes the transport over: asyncio
            # honours this pause; uvloop starts reading after connection_made regardless, so
            # data_received keeps what arrives early and _tls_hand_over gives it to TLS
            tr.pause_reading()
            loop = asyncio.get_running_loop()
            self._tls_task = loop.create_task(self._start_tls(tr))
            loop.call_soon(self._tls_hand_over, tr)  # runs after the task's first step
            return
        self._start_server_handshake()

    def _admit(self, tr: asyncio.Transport) -> bool:
        """An accepted connection: shed at once over the port's caps, else given a deadline."""
        if self._guard is not None:
            verdict, victim = self._guard.admit(self._source, self)
            if isinstance(victim, Connection):
                self._counters.evicted += 1
                victim._admitted = False  # uncounted by the guard already
                victim._warn_failure("evicting %s, still in its handshake, for a newer connection (the port's "
                                     "%d handshake slots are full)", victim.peer_name, self._limits.max_pending,
                                     kind="evicted")
                victim.abort("evicted for a newer connection")
            if verdict is not Admission.ADMITTED:
                self._counters.shed += 1
                self._warn_failure("shedding connection from %s: %s on this port", self.peer_name, verdict.value)
                self.state = ConnState.CLOSED
                self.close_reason = verdict.value
                tr.abort()
                return False
            self._admitted = True
        self._deadline = asyncio.get_running_loop().call_later(self._limits.handshake_deadline_s,
                                                               self._handshake_expired)
        return True

    def _handshake_expired(self) -> None:
        self._deadline = None
        if self.state is ConnState.HANDSHAKE:
            self._counters.handshake_timeouts += 1
            self._warn_failure("dropping connection: %s did not complete the handshake within %g s",
                               self.peer_name, self._limits.handshake_deadline_s)
            self.close("handshake deadline")
            if self.transport is not None:
                self.transport.abort()  # an idle peer gets no graceful close: its buffers go now

    def _warn_failure(self, msg: str, *args: object, kind: str | None = None, always_limit: bool = False) -> None:
        """A refused peer, logged at most once per interval and kind on a server (a flood must
        not fill the log); a client's own failures are logged every time, but for those that
        a man in the middle could repeat at will (``always_limit``)."""
        if self._fail_log is not None:
            self._fail_log.warning(msg, *args, kind=kind)
        elif always_limit:
            _limited_log(self._log).warning(msg, *args, kind=kind)
        else:
            self._log.warning(msg, *args)

    def _tls_hand_over(self, raw: asyncio.Transport) -> None:
        """Feeds the bytes read before start_tls took ``raw`` over to the TLS protocol it
        installed (a BufferedProtocol in asyncio and uvloop), ahead of any later byte: reading
        stays paused until start_tls resumes it, after this."""
        proto: Any = raw.get_protocol()
        if proto is self:  # start_tls has not taken the transport yet
            if self._tls_pending and not raw.is_closing():
                asyncio.get_running_loop().call_soon(self._tls_hand_over, raw)
            return
        data, self._tls_early = bytes(self._tls_early), bytearray()
        if not data:
            return
        if hasattr(proto, "buffer_updated"):  # a BufferedProtocol: how a transport feeds it
            view = memoryview(data)
            while view:
                buf = proto.get_buffer(len(view))
                n = min(len(buf), len(view))
                buf[:n] = view[:n]
                proto.buffer_updated(n)
                view = view[n:]
        else:
            proto.data_received(data)

    def _start_server_handshake(self) -> None:
        assert self.transport is not None
        if self._server_role is not None:
            self.transport.write(self.session.hello())

    async def _start_tls(self, raw: asyncio.Transport) -> None:
        assert self._tls is not None
        try:
            tr = await asyncio.get_running_loop().start_tls(
                raw, self, self._tls, server_side=True, ssl_handshake_timeout=self._tls_timeout)
        except Exception as e:  # ssl.SSLError, ConnectionError, timeouts: all mean "not this peer"
            self._tls_pending = False
            self.tls_failure(e)
            raw.close()
            return
        self._tls_pending = False
        if tr is None or tr.is_closing() or self.state is ConnState.CLOSED:
            if self.close_reason is None:  # not closed by us: the peer went away mid-handshake
                self.tls_failure(ConnectionResetError("the peer closed the connection"))
            if tr is not None:
                tr.close()
            return
        self.transport = tr
        self._start_server_handshake()

    def tls_failure(self, exc: BaseException) -> None:
        """Counts, logs (once per connection) and closes a connection whose TLS failed."""
        if self._tls_failed:
            return
        self._tls_failed = True
        reason = tls_failure_reason(exc)
        self._counters.auth_failures += 1
        self._warn_failure("dropping connection: TLS with %s failed: %s", self.peer_name, reason,
                           kind=f"tls {reason}")
        if not self.authenticated.done():
            self.authenticated.set_exception(ConnectionError(f"TLS with {self.peer_name} failed: {reason}"))
            if self._server_role is not None:
                self.authenticated.exception()  # nobody awaits it on this side: logged here instead
        self.close(f"TLS failed: {reason}")

    def data_received(self, data: bytes) -> None:
        if self._tls_pending:  # TLS bytes that came before start_tls took the transport (uvloop)
            self._tls_early += data
            if self.transport is not None:
                self.transport.pause_reading()
            return
        self.bytes_in += len(data)
        self._feed(data)

    def _feed(self, data: bytes) -> None:
        try:
            if self.state is ConnState.OPEN:
                frames = self._decoder.feed(data)  # the hot path: the session's decoder, directly
            elif self.state is ConnState.HANDSHAKE:
                step = self.session.receive(data)
                if not self._handshake_step(step):
                    return
                frames = list(step.frames)
            else:
                return
        except FrameAuthError as e:
            # never decoded; aborted, not closed: nothing more is read from or written to it
            self._counters.bad_frames += 1
            self._counters.bad_frame_auth += 1
            self._warn_failure("dropping connection: %s", e, kind="frame authentication", always_limit=True)
            self.abort(f"frame authentication failed: {e}")
            return
        except FrameError as e:
            self._counters.bad_frames += 1
            if self.state is ConnState.OPEN:
                self._log.warning("%s", e)
            else:
                self._warn_failure("%s", e)
            self.close(f"bad frame: {e}")
            return
        except HandshakeError as e:
            self._handshake_failed(e)
            return
        for msg_type, frame in frames:
            if self.state is not ConnState.OPEN:
                return
            if msg_type == MsgType.LINK_PING:
                continue  # a heartbeat: its arrival was the point
            try:
                route = self._route
                if route is None:
                    self.handler.on_frame(self, msg_type, frame)
                else:
                    fn = route.get(msg_type)
                    if fn is None:
                        self._refuse(msg_type)
                        return
                    fn(self, frame)
            except WireError as e:
                self._counters.bad_frames += 1
                self._log.warning("dropping connection: %s", e)
                self.close(f"unparsable {_type_name(msg_type)} frame")
                return
            except (DecodeError, struct.error) as e:
                self._counters.bad_frames += 1
                self._log.warning("dropping connection: %s sent a %s frame that does not parse: %s",
                                  self.peer_name, _type_name(msg_type), e)
                self.close(f"unparsable {_type_name(msg_type)} frame")
                return
        if self._decoder.failed is not None and self.is_open:
            self._feed(b"")  # a frame after these failed its tag: raised now, after the good ones

    def _handshake_step(self, step: Step) -> bool:
        """Writes the session's handshake replies; opens the connection when the handshake ended
        (the frames after it are then fed). False: nothing more to do with this read."""
        assert self.transport is not None
        for reply in step.replies:
            self.transport.write(reply)
        self.identity = self.session.identity
        if step.opened is None:
            return True
        self._tx = step.opened.send_mac
        self.peer_role = step.opened.peer_role
        if self._routes is not None:
            self._route = self._routes.table(self.peer_role)
        self.state = ConnState.OPEN
        self._handshake_done()
        self._start_liveness()
        if not self.authenticated.done():
            self.authenticated.set_result(None)
        self.handler.on_open(self)
        if step.more and self.is_open:
            self._feed(b"")  # the decoder stopped at the handshake's end; the frames after it are tagged
            return False
        return True

    def _handshake_failed(self, e: HandshakeError) -> None:
        assert self.transport is not None
        self._counters.auth_failures += 1
        self._warn_failure("dropping connection: %s", e)
        refusal = self.session.refusal()
        if refusal is not None:
            self.transport.write(refusal)
        if not self.authenticated.done():
            self.authenticated.set_exception(e)
            if self._server_role is not None:
                self.authenticated.exception()  # nobody awaits it on this side: logged above instead
        self.close(f"handshake failed: {e}")

    def use_routes(self, routes: Routes) -> None:
        """Dispatches by ``routes`` from now on (a client's handler calls it from ``on_open``,
        before any frame after the handshake is handed on)."""
        self._routes = routes
        self._route = routes.table(self.peer_role)

    def _refuse(self, msg_type: int) -> None:
        """A message the peer's role may not send here: counted, one line (rate-limited: a
        hostile peer may repeat it at will) and the connection closed."""
        self._counters.bad_frames += 1
        self._counters.bad_frame_role += 1
        ident = self.identity
        peer_id = ident.peer_id if ident is not None else ""
        endpoint = self._routes.endpoint if self._routes is not None else "?"
        self._warn_failure("refused %s from %s (role %r, id %r): not a message a %s may send to the %s; "
                           "closing the connection", _type_name(msg_type), self.peer_name, self.peer_role, peer_id,
                           self.peer_role or "peer", endpoint, kind="refused message", always_limit=True)
        self.close(f"refused {_type_name(msg_type)} from a {self.peer_role}")

    def _start_liveness(self) -> None:
        lv = self._liveness
        if lv.timeout_s > 0 and self.transport is not None:
            set_tcp_keepalive(self.transport)
            self._silence = Silence(lv.interval_s, lv.timeout_s, self.bytes_in, self.bytes_out,
                                    clock=self._loop.time, reading=self.transport.is_reading())
            self._live_timer = self._loop.call_later(lv.interval_s, self._live_tick)

    def _live_tick(self) -> None:
        """Every interval, the session's liveness rule (``session.Silence``): a ping when we sent
        nothing, an abort when the peer sent nothing for the timeout though we could read it."""
        self._live_timer = None
        tr, silence = self.transport, self._silence
        if self.state is not ConnState.OPEN or tr is None or tr.is_closing() or silence is None:
            return
        verdict = silence.tick(self.bytes_in, self.bytes_out, reading=tr.is_reading(),
                               writing_paused=self.writing_paused)
        if verdict.abort:
            self._counters.silent_peers += 1
            self._log.warning("dropping connection: %s sent nothing for %.1f s (frozen, or its host is gone)",
                              self.peer_name, verdict.silent_s)
            self.abort(f"silent for {verdict.silent_s:.1f} s")
            return
        if verdict.ping:
            self.send(_PING)
        silence.mark(self.bytes_in, self.bytes_out)
        self._live_timer = self._loop.call_later(self._liveness.interval_s, self._live_tick)

    def _handshake_done(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._admitted and self._guard is not None:
            self._guard.authenticated(self._source, self)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._live_timer is not None:
            self._live_timer.cancel()
            self._live_timer = None
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        if self._admitted and self._guard is not None:
            self._admitted = False
            self._guard.closed(was_authenticated=self.state is ConnState.OPEN, source=self._source, handle=self)
        # a TLS connection that fails before the secret's handshake ends: the peer refused our
        # certificate after its handshake completed (TLS 1.3 clients), or an upgrade failed
        # (start_tls reports it then, with the same reason; tls_failure counts once)
        if self._tls is not None and self.state is ConnState.HANDSHAKE and not self._tls_pending:
            if isinstance(exc, _ssl.SSLError):
                self.tls_failure(exc)
            elif self._server_role is None and self.bytes_in == 0 and self.close_reason is None:
                # a TLS server sends its hello at once; closing instead is how asyncio and uvloop
                # servers refuse a client's certificate after a TLS 1.3 handshake (no alert)
                self.tls_failure(ConnectionResetError(
                    "the server closed the connection right after the TLS handshake: it refused our "
                    "certificate (another topology's?)"))
        was_open = self.state is ConnState.OPEN
        self.state = ConnState.CLOSED
        if not self.authenticated.done():
            self.authenticated.set_exception(ConnectionError(f"connection to {self.peer_name} lost"))
            if self._server_role is not None:
                self.authenticated.exception()  # nobody awaits it on the accepting side
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

    @property
    def max_frame(self) -> int:
        return self._max_frame

    def set_max_frame(self, max_frame: int) -> None:
        """The largest frame this connection accepts from now on (the topology's
        heron_py.network.max.frame.bytes, once the plan that carries it is known)."""
        self._max_frame = max_frame
        self.session.set_max_frame(max_frame)

    def set_write_limits(self, high: int, low: int) -> None:
        if self.transport is not None:
            self.transport.set_write_buffer_limits(high=high, low=low)

    # API
    @property
    def is_open(self) -> bool:
        return self.state is ConnState.OPEN

    def send(self, frame: bytes) -> None:
        if self.state is ConnState.OPEN and self.transport is not None:
            n = len(frame) + TAG_SIZE
            self.bytes_out += n
            self._out_bytes += n
            out = self._out
            out.append(frame)
            out.append(self._tx.tag(frame))  # type: ignore[union-attr]  # set when the state became OPEN
            if len(out) == 2:
                self._loop.call_soon(self._write_out)

    def send_many(self, frames: Iterable[bytes]) -> None:
        """Queues several frames at once (a flushed batch list, held frames)."""
        if self.state is ConnState.OPEN and self.transport is not None:
            frames = frames if isinstance(frames, (list, tuple)) else list(frames)
            if not frames:
                return
            n = sum(map(len, frames)) + TAG_SIZE * len(frames)
            self.bytes_out += n
            self._out_bytes += n
            out = self._out
            was_empty = not out
            tag = self._tx.tag  # type: ignore[union-attr]  # set when the state became OPEN
            for frame in frames:
                out.append(frame)
                out.append(tag(frame))
            if was_empty:
                self._loop.call_soon(self._write_out)

    def _write_out(self) -> None:
        """The frames queued this turn, in one call; nothing once the connection closed."""
        out, self._out = self._out, []
        self._out_bytes = 0
        tr = self.transport
        if out and tr is not None and not tr.is_closing():
            tr.writelines(out)

    def send_msg(self, msg: Message) -> None:
        """Sends a protobuf message, framed as the type its class is registered under (``wire``)."""
        self.send(encode_msg(msg))

    def write_buffer_size(self) -> int:
        return self.transport.get_write_buffer_size() + self._out_bytes if self.transport is not None else 0

    def pause_reading(self) -> None:
        if self.transport is not None and self.transport.is_reading():
            self.transport.pause_reading()
            if self._silence is not None:
                self._silence.paused()  # what the peer sends now waits unseen: not judged meanwhile

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_reading() and not self.transport.is_closing():
            self.transport.resume_reading()
            if self._silence is not None:
                self._silence.resumed()

    def abort(self, reason: str) -> None:
        """Ends the connection at once: nothing queued is written (a peer that failed
        authentication or went silent gets no graceful close, and we wait for nothing)."""
        if self.close_reason is None:
            self.close_reason = reason
            self._log.debug("aborting the connection to %s: %s", self.peer_name, reason)
        self._out, self._out_bytes = [], 0
        if self.transport is not None:
            self.transport.abort()

    def close(self, reason: str = "") -> None:
        """Idempotent; the first reason given is kept (and logged at debug level)."""
        if self.close_reason is None:
            self.close_reason = reason or "closed"
            if reason:
                self._log.debug("closing the connection to %s: %s", self.peer_name, reason)
        if self.transport is not None and not self.transport.is_closing():
            self._write_out()  # what was sent before close() still goes, as with a direct write
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
    ssl: _ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    counters: Counters | None = None,
    liveness: Liveness = DEFAULT_LIVENESS,
    routes: Routes | None = None,
    expect: PeerIdentity | None = None,
) -> Connection:
    """Opens a TCP connection (TLS with ``ssl``: ``tls.client_context``, checking the server's
    certificate for ``server_hostname``, ``tls.server_name(topology)``) and completes the
    handshake; raises on failure: a failed TLS handshake is a ConnectionError that says why, a
    server that is not ``expect`` (its role and id) a HandshakeError."""
    loop = asyncio.get_running_loop()
    peer = f"{host}:{port}"
    if ssl is not None and ssl.check_hostname and not server_hostname:
        raise ValueError(f"connect to {peer} with TLS: give server_hostname (tls.server_name(topology)); "
                         "certificates name the topology, not the host")
    counters = counters or Counters()

    def factory() -> Connection:
        return Connection(handler, secret, client_role=role, client_id=peer_id, peer_name=peer,
                          max_frame=max_frame, log=log, counters=counters, tls=ssl, liveness=liveness,
                          routes=routes, expect=expect)

    if ssl is None:
        _, conn = await asyncio.wait_for(loop.create_connection(factory, host, port), timeout)
    else:
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(factory, host, port, ssl=ssl, server_hostname=server_hostname,
                                       ssl_handshake_timeout=timeout),
                timeout)
        except (_ssl.SSLError, ConnectionResetError, ConnectionAbortedError, EOFError) as e:
            reason = tls_failure_reason(e)
            counters.auth_failures += 1
            log.warning("dropping connection: TLS with %s failed: %s", peer, reason)
            raise ConnectionError(f"TLS with {peer} failed: {reason}") from e
    return await _authenticated(conn, timeout)


async def _authenticated(conn: Connection, timeout: float) -> Connection:
    """Waits for a new client connection's handshake; closes it when that does not complete."""
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
    ssl: _ssl.SSLContext | None = None,
    tls_handshake_timeout: float = 10.0,
    limits: GuardLimits = DEFAULT_LIMITS,
    liveness: Liveness = DEFAULT_LIVENESS,
    routes: Routes | None = None,
    server_id: str = "",
) -> asyncio.Server:
    """Accepts connections; with ``ssl`` (``tls.server_context``) each one is upgraded to TLS
    first (the module docstring says how), and one whose TLS handshake does not complete within
    ``tls_handshake_timeout`` seconds is dropped and counted. The handshake proves ``role`` and
    ``server_id`` to the clients."""
    loop = asyncio.get_running_loop()
    guard, fail_log = PortGuard(limits), RateLimitedLog(log, limits.log_interval_s)  # one per port
    return await loop.create_server(
        lambda: Connection(handler_factory(), secret, server_role=role, max_frame=max_frame,
                           log=log, counters=counters, tls=ssl,
                           tls_handshake_timeout=min(tls_handshake_timeout, limits.handshake_deadline_s),
                           guard=guard, fail_log=fail_log, liveness=liveness, routes=routes, server_id=server_id),
        host, port)


async def serve_unix(
    path: str,
    handler_factory: Callable[[], FrameHandler],
    secret: bytes,
    *,
    role: str,
    log: logging.Logger,
    counters: Counters,
    max_frame: int = DEFAULT_MAX_FRAME,
    limits: GuardLimits = DEFAULT_LIMITS,
    liveness: Liveness = DEFAULT_LIVENESS,
    routes: Routes | None = None,
    server_id: str = "",
) -> asyncio.Server:
    """Like ``serve``, on a Unix domain socket (a container's instances to its stream manager:
    no TCP stack on the way). The handshake is the same; the file is made private (0600)."""
    import os

    loop = asyncio.get_running_loop()
    if os.path.exists(path):
        os.unlink(path)  # a previous incarnation's socket: nobody listens on it any more
    guard, fail_log = PortGuard(limits), RateLimitedLog(log, limits.log_interval_s)
    server = await loop.create_unix_server(
        lambda: Connection(handler_factory(), secret, server_role=role, max_frame=max_frame, peer_name=path,
                           log=log, counters=counters, guard=guard, fail_log=fail_log, liveness=liveness,
                           routes=routes, server_id=server_id),
        path)
    os.chmod(path, 0o600)
    return server


async def connect_unix(
    path: str,
    handler: FrameHandler,
    secret: bytes,
    *,
    role: str,
    peer_id: str,
    log: logging.Logger,
    timeout: float = 5.0,
    max_frame: int = DEFAULT_MAX_FRAME,
    liveness: Liveness = DEFAULT_LIVENESS,
    routes: Routes | None = None,
    expect: PeerIdentity | None = None,
) -> Connection:
    """Like ``connect``, to a Unix domain socket."""
    loop = asyncio.get_running_loop()
    _, conn = await asyncio.wait_for(
        loop.create_unix_connection(
            lambda: Connection(handler, secret, client_role=role, client_id=peer_id, peer_name=path,
                               max_frame=max_frame, log=log, liveness=liveness, routes=routes, expect=expect),
            path),
        timeout)
    return await _authenticated(conn, timeout)
