"""The server side of TLS: each accepted plain TCP connection is upgraded with
``loop.start_tls`` by a ``TlsAcceptor``, and a ``net.Connection`` is made only once TLS is set
up, on the TLS transport.

The server accepts plain TCP and upgrades because asyncio and uvloop, given
``create_server(ssl=...)``, drop a connection whose TLS handshake fails without telling the
protocol (its ``connection_made``/``connection_lost`` are never called), so such a failure could
be neither counted nor logged. A failed upgrade (a bad certificate, a plain TCP peer on a TLS
port, a timeout) is counted in ``Counters.auth_failures`` and logged once with the peer and the
reason, like a failed handshake on the secret.
"""

from __future__ import annotations

import asyncio
import enum
import ssl as _ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from heron_py.common.conn_admission import FailureLog, Gate, Ticket, TicketState

if TYPE_CHECKING:  # an annotation only: net imports this module
    from heron_py.common.net import Counters

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


def count_tls_failure(exc: BaseException, peer_name: str, counters: Counters, failures: FailureLog) -> str:
    """Counts and logs a failed TLS handshake with ``peer_name``; returns the reason in words."""
    reason = tls_failure_reason(exc)
    counters.auth_failures += 1
    failures.warn("dropping connection: TLS with %s failed: %s", peer_name, reason, kind=f"tls {reason}")
    return reason


class AcceptorState(enum.Enum):
    ACCEPTED = "accepted"  # connection_made not run yet
    UPGRADING = "upgrading"  # start_tls under way
    HANDED_OVER = "handed over"  # the Connection owns the TLS transport
    ENDED = "ended"  # shed, failed or closed before the hand-over


class TlsAcceptor(asyncio.Protocol):
    """One accepted connection on a TLS port until its TLS handshake ends: admitted by the
    port's ``gate`` (its ticket and handshake deadline cover TLS too), upgraded with
    ``ctx``, then handed with its ticket to the protocol ``make`` returns (a Connection,
    given the TLS transport through ``connection_made``).

    Reading is paused while start_tls takes the transport over: asyncio honours that pause;
    uvloop starts reading after ``connection_made`` regardless, so ``data_received`` keeps what
    arrives early and ``_hand_over_early`` gives it to TLS."""

    def __init__(self, ctx: _ssl.SSLContext, timeout: float, gate: Gate, counters: Counters,
                 make: Callable[[Ticket], asyncio.Protocol]) -> None:
        self.peer_name = "peer"
        self.state = AcceptorState.ACCEPTED
        self.close_reason: str | None = None
        self._ctx = ctx
        self._timeout = timeout
        self._gate = gate
        self._counters = counters
        self._make = make
        self._raw: asyncio.Transport | None = None
        self._ticket: Ticket | None = None
        self._upgrading = False  # start_tls not returned yet
        self._task: asyncio.Task[None] | None = None  # held: the loop keeps only a weak reference
        self._lost = False
        self._failed = False
        self._early = bytearray()  # TLS bytes read before start_tls took the transport (uvloop)
        self._app_early = bytearray()  # plain bytes after TLS, before the Connection took over

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        raw: asyncio.Transport = transport  # type: ignore[assignment]  # uvloop's: asyncio.Transport's methods
        self._raw = raw
        peer = raw.get_extra_info("peername")
        source = str(peer[0]) if isinstance(peer, tuple) and peer else self.peer_name
        if peer:
            self.peer_name = f"{peer[0]}:{peer[1]}"
        self._ticket = ticket = self._gate.admit(source, self)
        if ticket.state is TicketState.SHED:
            self.state, self.close_reason = AcceptorState.ENDED, ticket.reason
            raw.abort()
            return
        self.state = AcceptorState.UPGRADING
        raw.pause_reading()
        loop = asyncio.get_running_loop()
        self._upgrading = True
        self._task = loop.create_task(self._upgrade(raw))
        loop.call_soon(self._hand_over_early, raw)  # runs after the task's first step

    def data_received(self, data: bytes) -> None:
        if self._raw is not None and self._raw.get_protocol() is self:  # before start_tls took it (uvloop)
            self._early += data
            self._raw.pause_reading()
        else:  # decrypted, as the app protocol of the TLS transport: the Connection's once it exists
            self._app_early += data

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        if self.state is not AcceptorState.HANDED_OVER:
            self.state = AcceptorState.ENDED
        if self._ticket is not None and self._ticket.holder is self:
            self._gate.closed(self._ticket)
        # start_tls reports a failure with the same reason; counted once
        if not self._upgrading and isinstance(exc, _ssl.SSLError):
            self.fail(exc)

    def close(self, reason: str = "") -> None:
        if self.close_reason is None:
            self.close_reason = reason or "closed"
        if self._raw is not None and not self._raw.is_closing():
            self._raw.close()

    def abort(self, reason: str) -> None:
        if self.close_reason is None:
            self.close_reason = reason
        if self._raw is not None:
            self._raw.abort()

    def fail(self, exc: BaseException) -> None:
        """Counts, logs (once per connection) and closes a connection whose TLS failed."""
        if self._failed:
            return
        self._failed = True
        reason = count_tls_failure(exc, self.peer_name, self._counters, self._gate.failures)
        self.close(f"TLS failed: {reason}")

    async def _upgrade(self, raw: asyncio.Transport) -> None:
        try:
            tr = await asyncio.get_running_loop().start_tls(
                raw, self, self._ctx, server_side=True, ssl_handshake_timeout=self._timeout)
        except Exception as e:  # ssl.SSLError, ConnectionError, timeouts: all mean "not this peer"
            self._upgrading = False
            self.fail(e)
            raw.close()
            return
        self._upgrading = False
        if tr is None or tr.is_closing() or self._lost:
            if self.close_reason is None:  # not closed by us: the peer went away mid-handshake
                self.fail(ConnectionResetError("the peer closed the connection"))
            if tr is not None:
                tr.close()
            return
        assert self._ticket is not None
        conn = self._make(self._ticket)
        self.state = AcceptorState.HANDED_OVER
        tr.set_protocol(conn)
        conn.connection_made(tr)
        data, self._app_early = bytes(self._app_early), bytearray()
        if data and not tr.is_closing():
            conn.data_received(data)

    def _hand_over_early(self, raw: asyncio.Transport) -> None:
        """Feeds the bytes read before start_tls took ``raw`` over to the TLS protocol it
        installed (a BufferedProtocol in asyncio and uvloop), ahead of any later byte: reading
        stays paused until start_tls resumes it, after this."""
        proto: Any = raw.get_protocol()
        if proto is self:  # start_tls has not taken the transport yet
            if self._upgrading and not raw.is_closing():
                asyncio.get_running_loop().call_soon(self._hand_over_early, raw)
            return
        data, self._early = bytes(self._early), bytearray()
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
