"""asyncio glue for framed, authenticated connections.

The protocol logic lives in ``framing`` and ``handshake`` (sans-I/O, driven by
``session.Session``); a ``Connection`` is the transport: bytes in to its session, frames out
to its handler, frames sent, coalesced and written, reading and writing paused. It runs the
handshake first and hands frames to its handler only once the peer has proven the secret. Any
malformed frame or failed handshake closes that one connection, is logged once with the reason,
and is counted; the daemon keeps serving.

What is not the transport's is its collaborators': a listening port's admission policy (caps,
eviction, the handshake deadline, the log of refused peers: ``conn_admission.Gate``), the
server's TLS upgrade (``conn_tls.TlsAcceptor``, done before the Connection exists), the
heartbeats (``conn_liveness.LivenessTimer``) and the routes of each peer role with their
refusal (``conn_dispatch``).

TLS (optional: ``serve(ssl=...)``, ``connect(ssl=..., server_hostname=...)``, contexts from
``heron_py.common.tls``) wraps the connection; the handshake on the secret still runs inside
it. A failed TLS handshake (a bad certificate, a plain TCP peer on a TLS port) is handled
like a failed secret handshake: that one connection is closed, the failure is logged once with
the peer and the reason and counted in ``Counters.auth_failures``. A server accepts plain TCP
and upgrades each connection (``conn_tls`` says why); a client uses
``create_connection(ssl=...)``, which raises the failure to the caller.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import logging
import ssl as _ssl
import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from google.protobuf.message import DecodeError, Message

from heron_py.common.config import HeartbeatConfig
from heron_py.common.conn_admission import FailureLog, Gate, Ticket, TicketState
from heron_py.common.conn_dispatch import Dispatcher, type_name
from heron_py.common.conn_dispatch import FrameFn as FrameFn
from heron_py.common.conn_dispatch import Route as Route
from heron_py.common.conn_dispatch import Routes as Routes
from heron_py.common.conn_dispatch import on as on
from heron_py.common.conn_dispatch import on_raw as on_raw
from heron_py.common.conn_dispatch import relay as relay
from heron_py.common.conn_liveness import LivenessTimer
from heron_py.common.conn_liveness import set_tcp_keepalive as set_tcp_keepalive
from heron_py.common.conn_tls import TlsAcceptor, count_tls_failure
from heron_py.common.conn_tls import tls_failure_reason as tls_failure_reason
from heron_py.common.frameauth import TAG_SIZE, FrameMac
from heron_py.common.framing import (
    DEFAULT_MAX_FRAME,
    FrameAuthError,
    FrameError,
    MsgType,
)
from heron_py.common.guard import DEFAULT_LIMITS, GuardLimits
from heron_py.common.handshake import HandshakeError, PeerIdentity
from heron_py.common.held_output import HeldWriter
from heron_py.common.session import Session, Step
from heron_py.common.wire import WireError, encode_msg

# What a server learned of a connection's peer after the handshake, one typed int per role,
# ``Connection.task`` and ``Connection.container``: the task an instance registered as (the stream
# manager's instance server sets it; its per-batch source check is that one attribute read) and
# the container a stream manager registered as (the master). These mean "none": on every other
# connection and until the registration (a batch's source task is never negative).
NO_TASK = -1
NO_CONTAINER = -1


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


class ByRole(BaseHandler):
    """A server's handlers, one per peer role (Heron's stream manager has an ``InstanceServer``
    and an ``StMgrServer`` behind one port): a connection takes its peer role's handler when the
    handshake proves that role, once. Until then, and for a role with none, the no-op defaults
    (such a role's routes refuse whatever it sends)."""

    def __init__(self, handlers: Mapping[str, FrameHandler]) -> None:
        self.handlers = dict(handlers)

    def for_role(self, role: str) -> FrameHandler:
        return self.handlers.get(role, _NO_HANDLER)


_NO_HANDLER = BaseHandler()


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


@dataclasses.dataclass(frozen=True)
class Accepted:
    """The accepting side of a connection: what its server proves in the handshake (``role``,
    ``server_id``) and the port's admission ``gate``. ``ticket``: the connection's admission,
    when the TLS acceptor got it at accept (a plain connection is admitted when it is made)."""

    role: str
    gate: Gate
    server_id: str = ""
    ticket: Ticket | None = None


class Connection(asyncio.Protocol):
    """One framed connection's transport: bytes in to its session (the handshake, then the
    decoder, whose frames go to the peer role's routes or the handler), frames out coalesced
    per turn of the event loop, and the watermarks. Admission, TLS set-up, heartbeats and
    refusals are its collaborators' (the module docstring names them)."""

    def __init__(
        self,
        handler: FrameHandler,
        secret: bytes,
        *,
        log: logging.Logger,
        accepted: Accepted | None = None,  # set on the accepting side
        client_role: str = "", client_id: str = "",  # what a client proves
        expect: PeerIdentity | None = None,  # the server a client means to reach, any other refused
        peer_name: str = "peer",
        max_frame: int = DEFAULT_MAX_FRAME,
        counters: Counters | None = None,
        tls: _ssl.SSLContext | None = None,
        liveness: Liveness = DEFAULT_LIVENESS,
        routes: Routes | None = None,
    ) -> None:
        """``routes``: what each peer role may send, by message type; without it every frame goes
        to ``handler.on_frame``. ``tls``: the context the transport is wrapped with (a loss in
        the handshake is then a TLS failure)."""
        self.handler = handler
        self.state = ConnState.HANDSHAKE
        # per-connection traffic, for the metrics manager (one add per read or write call)
        self.bytes_in = self.bytes_out = 0
        self.identity: PeerIdentity | None = None
        # the peer's proven role once open: the client's on a server, the server's on a client
        self.peer_role = ""
        self.peer_name = peer_name
        self.transport: asyncio.Transport | None = None
        self._loop = asyncio.get_running_loop()
        self.authenticated: asyncio.Future[None] = self._loop.create_future()
        self.task, self.container = NO_TASK, NO_CONTAINER  # the peer's registration, typed (above NO_TASK)
        self.writing_paused = False
        self.close_reason: str | None = None  # why we closed it (None: open, or the peer closed)
        self._accepted = accepted
        self._max_frame = max_frame
        self._log = log
        self._counters = counters or Counters()
        self._failures = accepted.gate.failures if accepted is not None else FailureLog(log)
        self._ticket: Ticket | None = None  # the port's admission, on the accepting side
        self._dispatch = Dispatcher(routes, self._counters, self._failures) if routes is not None else None
        self._route: dict[int, FrameFn] | None = None  # the peer role's table, once open
        limits = accepted.gate.limits if accepted is not None else GuardLimits()
        # the protocol (handshake, decoder, limits, keys) is the sans-I/O session; this class moves bytes
        self.session = Session(secret, server_role=accepted.role if accepted is not None else None,
                               client_role=client_role, client_id=client_id, peer=peer_name, max_frame=max_frame,
                               pre_auth_max=limits.pre_auth_max_frame,
                               server_id=accepted.server_id if accepted is not None else "", expect=expect)
        self._decoder = self.session.decoder  # fed directly once open: the hot path
        self._tls = tls is not None
        self._tls_failed = False
        # frames sent in one turn of the event loop go out in one writelines at its end: a
        # stream manager forwards many frames per socket read, and a write each was a syscall
        # each (the largest cost of the spout's stream manager with acking on)
        self._out: list[bytes] = []
        self._out_bytes = 0
        self._held: HeldWriter | None = None  # with hold_output: what passes the transport's share
        # per-frame tags once open (frameauth): ours on what we send; the decoder checks the peer's
        self._tx: FrameMac | None = None
        self._liveness = liveness
        self._live: LivenessTimer | None = None  # once open, with a timeout

    # asyncio.Protocol
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses but have its methods
        tr: asyncio.Transport = transport  # type: ignore[assignment]
        self.transport = tr
        peer = tr.get_extra_info("peername")
        # the gate shares the handshake slots fairly between source addresses
        source = str(peer[0]) if isinstance(peer, tuple) and peer else self.peer_name
        if peer and self.peer_name == "peer":
            self.peer_name = f"{peer[0]}:{peer[1]}"
            self.session.rename(self.peer_name)
            self._decoder = self.session.decoder
        accepted = self._accepted
        if accepted is None:
            return  # a server speaks first
        if accepted.ticket is not None:  # admitted at accept, before TLS was set up
            self._ticket = accepted.ticket
            accepted.ticket.pass_to(self)
        else:
            self._ticket = accepted.gate.admit(source, self)
            if self._ticket.state is TicketState.SHED:
                self.state = ConnState.CLOSED
                self.close_reason = self._ticket.reason
                tr.abort()
                return
        tr.write(self.session.hello())

    def data_received(self, data: bytes) -> None:
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
            self._failures.warn("dropping connection: %s", e, kind="frame authentication", always_limit=True)
            self.abort(f"frame authentication failed: {e}")
            return
        except FrameError as e:
            self._counters.bad_frames += 1
            if self.state is ConnState.OPEN:
                self._log.warning("%s", e)
            else:
                self._failures.warn("%s", e)
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
                        assert self._dispatch is not None  # the table came from it
                        self._dispatch.refuse(self, msg_type)
                        return
                    fn(self, frame)
            except WireError as e:
                self._counters.bad_frames += 1
                self._log.warning("dropping connection: %s", e)
                self.close(f"unparsable {type_name(msg_type)} frame")
                return
            except (DecodeError, struct.error) as e:
                self._counters.bad_frames += 1
                self._log.warning("dropping connection: %s sent a %s frame that does not parse: %s",
                                  self.peer_name, type_name(msg_type), e)
                self.close(f"unparsable {type_name(msg_type)} frame")
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
        opened = step.opened
        if opened is None:
            return True
        self._tx = opened.send_mac
        self.peer_role = opened.peer_role
        if isinstance(self.handler, ByRole):  # a server with a handler per role: this peer's, from now on
            self.handler = self.handler.for_role(self.peer_role)
        if self._dispatch is not None:
            self._route = self._dispatch.table(self.peer_role)
        self.state = ConnState.OPEN
        if self._ticket is not None and self._accepted is not None:
            self._accepted.gate.authenticated(self._ticket)
        lv = self._liveness
        if lv.timeout_s > 0:
            self._live = LivenessTimer(self, self.transport, lv, self._counters, self._log, clock=self._loop.time,
                                       call_later=self._loop.call_later)
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
        self._failures.warn("dropping connection: %s", e)
        refusal = self.session.refusal()
        if refusal is not None:
            self.transport.write(refusal)
        self._not_authenticated(e)
        self.close(f"handshake failed: {e}")

    def _not_authenticated(self, exc: BaseException) -> None:
        if not self.authenticated.done():
            self.authenticated.set_exception(exc)
            if self._accepted is not None:
                self.authenticated.exception()  # nobody awaits it on the accepting side: logged instead

    def use_routes(self, routes: Routes) -> None:
        """Dispatches by ``routes`` from now on (a client's handler calls it from ``on_open``,
        before any frame after the handshake is handed on)."""
        self._dispatch = Dispatcher(routes, self._counters, self._failures)
        self._route = self._dispatch.table(self.peer_role)

    def tls_failure(self, exc: BaseException) -> None:
        """Counts, logs (once per connection) and closes a connection whose TLS failed."""
        if self._tls_failed:
            return
        self._tls_failed = True
        reason = count_tls_failure(exc, self.peer_name, self._counters, self._failures)
        self._not_authenticated(ConnectionError(f"TLS with {self.peer_name} failed: {reason}"))
        self.close(f"TLS failed: {reason}")

    def connection_lost(self, exc: Exception | None) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self._ticket is not None and self._accepted is not None:
            self._accepted.gate.closed(self._ticket)
        # a TLS connection that fails before the secret's handshake ends: the peer refused our
        # certificate after its handshake completed (TLS 1.3 clients)
        if self._tls and self.state is ConnState.HANDSHAKE:
            if isinstance(exc, _ssl.SSLError):
                self.tls_failure(exc)
            elif self._accepted is None and self.bytes_in == 0 and self.close_reason is None:
                # a TLS server sends its hello at once; closing instead is how asyncio and uvloop
                # servers refuse a client's certificate after a TLS 1.3 handshake (no alert)
                self.tls_failure(ConnectionResetError(
                    "the server closed the connection right after the TLS handshake: it refused our "
                    "certificate (another topology's?)"))
        was_open = self.state is ConnState.OPEN
        self.state = ConnState.CLOSED
        self._not_authenticated(ConnectionError(f"connection to {self.peer_name} lost"))
        if was_open:
            self.handler.on_close(self)

    # the transport calls these when its write buffer crosses the limits set with
    # set_write_limits (high on the way up, low on the way down): the watermarks
    # (with held output they bound the transport's share instead: HeldWriter keeps the marks)
    def pause_writing(self) -> None:
        if self._held is None:
            self._writing(True)

    def resume_writing(self) -> None:
        if self._held is None:
            self._writing(False)
        else:
            self._held.write()  # the transport drained to half its share: more of what is held

    def _writing(self, paused: bool) -> None:
        self.writing_paused = paused
        self.handler.on_writing(self, paused)

    @property
    def max_frame(self) -> int:
        return self._max_frame

    def set_max_frame(self, max_frame: int) -> None:
        """The largest frame this connection accepts from now on (the topology's
        heron_py.network.max.frame.bytes, once the plan that carries it is known)."""
        self._max_frame = max_frame
        self.session.set_max_frame(max_frame)

    def set_write_limits(self, high: int, low: int) -> None:
        if self._held is not None:
            self._held.set_limits(high, low)
        elif self.transport is not None:
            self.transport.set_write_buffer_limits(high=high, low=low)

    def hold_output(self, cap: int) -> None:
        """From now on at most about ``cap`` bytes of what is sent sit in the transport's
        buffer (a frame more at the most); the rest waits in this connection, where
        ``drop_held`` still reaches it (heron_py/common/held_output.py says why). The
        watermarks of ``set_write_limits`` then count both. Idempotent; on an open connection."""
        tr = self.transport
        if self._held is not None or tr is None or self._tx is None:
            return
        self._write_out()  # what was sent before goes first, tagged as it was
        low, high = tr.get_write_buffer_limits()
        self._held = HeldWriter(cap, tr, self._tx.tag, self._writing, self._loop.call_soon, self.writing_paused)
        self._held.set_limits(high, low)

    def drop_held(self, is_dropped: Callable[[bytes], bool]) -> list[bytes]:
        """The held frames ``is_dropped`` picks, taken out and returned (none without
        ``hold_output``): they are never written."""
        return self._held.drop(is_dropped) if self._held is not None else []

    # API
    @property
    def is_open(self) -> bool:
        return self.state is ConnState.OPEN

    def send(self, frame: bytes) -> None:
        if self.state is ConnState.OPEN and self.transport is not None:
            n = len(frame) + TAG_SIZE
            self.bytes_out += n
            if self._held is not None:
                self._held.add(frame)
                return
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
            if self._held is not None:
                self._held.add_many(frames)
                return
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
        if self.transport is None:
            return 0
        held = self._held.held.nbytes if self._held is not None else 0
        return self.transport.get_write_buffer_size() + self._out_bytes + held

    def pause_reading(self) -> None:
        if self.transport is not None and self.transport.is_reading():
            self.transport.pause_reading()
            if self._live is not None:
                self._live.paused()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_reading() and not self.transport.is_closing():
            self.transport.resume_reading()
            if self._live is not None:
                self._live.resumed()

    def abort(self, reason: str) -> None:
        """Ends the connection at once: nothing queued is written (a peer that failed
        authentication or went silent gets no graceful close, and we wait for nothing)."""
        if self.close_reason is None:
            self.close_reason = reason
            self._log.debug("aborting the connection to %s: %s", self.peer_name, reason)
        self._out, self._out_bytes = [], 0
        if self._held is not None:
            self._held.held.take_all()
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
            if self._held is not None:
                self._held.flush_all()
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
    first (``conn_tls.TlsAcceptor``), and one whose TLS handshake does not complete within
    ``tls_handshake_timeout`` seconds is dropped and counted. The handshake proves ``role`` and
    ``server_id`` to the clients."""
    loop = asyncio.get_running_loop()
    accepted = Accepted(role, Gate(limits, log, counters), server_id)  # one gate per port

    def connection(ticket: Ticket | None = None) -> Connection:
        side = accepted if ticket is None else dataclasses.replace(accepted, ticket=ticket)
        return Connection(handler_factory(), secret, accepted=side, max_frame=max_frame, log=log,
                          counters=counters, tls=ssl, liveness=liveness, routes=routes)

    if ssl is None:
        return await loop.create_server(connection, host, port)
    timeout = min(tls_handshake_timeout, limits.handshake_deadline_s)
    return await loop.create_server(lambda: TlsAcceptor(ssl, timeout, accepted.gate, counters, connection),
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
    accepted = Accepted(role, Gate(limits, log, counters), server_id)
    server = await loop.create_unix_server(
        lambda: Connection(handler_factory(), secret, accepted=accepted, max_frame=max_frame, peer_name=path,
                           log=log, counters=counters, liveness=liveness, routes=routes),
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
