"""Admission to a listening port, applied to live connections: the port's caps and the
eviction of a pending connection (``guard.PortGuard``'s rules), the handshake deadline, and the
rate-limited log of refused peers.

A port's ``Gate`` is made once by ``net.serve``/``net.serve_unix`` and shared by what they
accept. Each accepted connection gets a ``Ticket`` at accept: shed at once, or pending until it
authenticates or its deadline passes. Who holds the ticket (a ``Holder``: the TLS acceptor while
TLS is set up, then the ``net.Connection``) is what the gate closes when it evicts or expires
it; the ticket passes from one to the other without leaving the guard's count.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from heron_py.common.guard import Admission, GuardLimits, PortGuard, RateLimitedLog

if TYPE_CHECKING:  # an annotation only: net imports this module
    from heron_py.common.net import Counters

_LIMITED: dict[str, RateLimitedLog] = {}


def _limited_log(log: logging.Logger) -> RateLimitedLog:
    """One rate-limited log per logger, for failures on connecting sides (no port to own one)."""
    limited = _LIMITED.get(log.name)
    if limited is None:
        limited = _LIMITED[log.name] = RateLimitedLog(log)
    return limited


class FailureLog:
    """Where a connection's failures and refused peers are logged. On a server, at most once
    per interval and kind for the whole port (a flood must not fill the log); on a client every
    time, but for those that a man in the middle could repeat at will (``always_limit``)."""

    def __init__(self, log: logging.Logger, port: RateLimitedLog | None = None) -> None:
        self._log = log
        self._port = port

    def warn(self, msg: str, *args: object, kind: str | None = None, always_limit: bool = False) -> None:
        if self._port is not None:
            self._port.warning(msg, *args, kind=kind)
        elif always_limit:
            _limited_log(self._log).warning(msg, *args, kind=kind)
        else:
            self._log.warning(msg, *args)


class Holder(Protocol):
    """What holds a ticket: the gate names it in its log lines and ends it on eviction or at
    the deadline."""

    peer_name: str

    def close(self, reason: str = "") -> None: ...
    def abort(self, reason: str) -> None: ...


class TicketState(enum.Enum):
    SHED = "shed"  # refused at accept: over the port's caps
    PENDING = "pending"  # counted by the guard, in its handshake (TLS, then the secret's)
    OPEN = "open"  # authenticated: counted as open
    RELEASED = "released"  # closed or evicted: no longer counted


class Ticket:
    """One accepted connection's place at its port."""

    __slots__ = ("deadline", "holder", "reason", "source", "state")

    def __init__(self, source: str, holder: Holder) -> None:
        self.source = source  # the peer's address: the guard shares the handshake slots between them
        self.holder = holder
        self.state = TicketState.PENDING
        self.reason = ""  # why it was shed
        self.deadline: asyncio.TimerHandle | None = None

    def pass_to(self, holder: Holder) -> None:
        """The connection made for it once TLS was set up holds it from now on."""
        self.holder = holder

    def stop_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None


class Gate:
    """A listening port's admission policy: sheds over its caps, evicts for a newcomer, ends
    the connections that do not authenticate within the deadline. ``call_later`` (the running
    loop's by default) runs the deadlines."""

    def __init__(self, limits: GuardLimits, log: logging.Logger, counters: Counters,
                 call_later: Callable[..., asyncio.TimerHandle] | None = None) -> None:
        self.limits = limits
        self.guard = PortGuard(limits)
        # one per port: a flood of failures costs one line per interval and kind
        self.failures = FailureLog(log, RateLimitedLog(log, limits.log_interval_s))
        self._counters = counters  # shed, evicted, handshake_timeouts
        self._call_later = call_later

    def admit(self, source: str, holder: Holder) -> Ticket:
        """A newly accepted connection from ``source``: its ticket, shed or pending (with its
        deadline running). A pending connection evicted to make room is aborted here."""
        ticket = Ticket(source, holder)
        verdict, victim = self.guard.admit(source, ticket)
        if isinstance(victim, Ticket):
            self._evict(victim)
        if verdict is not Admission.ADMITTED:
            self._counters.shed += 1
            self.failures.warn("shedding connection from %s: %s on this port", holder.peer_name, verdict.value)
            ticket.state, ticket.reason = TicketState.SHED, verdict.value
            return ticket
        call_later = self._call_later or asyncio.get_running_loop().call_later
        ticket.deadline = call_later(self.limits.handshake_deadline_s, self._expired, ticket)
        return ticket

    def _evict(self, victim: Ticket) -> None:
        self._counters.evicted += 1
        victim.state = TicketState.RELEASED  # uncounted by the guard already
        victim.stop_deadline()
        self.failures.warn("evicting %s, still in its handshake, for a newer connection (the port's "
                           "%d handshake slots are full)", victim.holder.peer_name, self.limits.max_pending,
                           kind="evicted")
        victim.holder.abort("evicted for a newer connection")

    def _expired(self, ticket: Ticket) -> None:
        ticket.deadline = None
        if ticket.state is TicketState.PENDING:
            self._counters.handshake_timeouts += 1
            self.failures.warn("dropping connection: %s did not complete the handshake within %g s",
                               ticket.holder.peer_name, self.limits.handshake_deadline_s)
            ticket.holder.close("handshake deadline")
            ticket.holder.abort("handshake deadline")  # an idle peer gets no graceful close: its buffers go now

    def authenticated(self, ticket: Ticket) -> None:
        ticket.stop_deadline()
        if ticket.state is TicketState.PENDING:
            self.guard.authenticated(ticket.source, ticket)
            ticket.state = TicketState.OPEN

    def closed(self, ticket: Ticket) -> None:
        ticket.stop_deadline()
        if ticket.state is TicketState.PENDING or ticket.state is TicketState.OPEN:
            self.guard.closed(was_authenticated=ticket.state is TicketState.OPEN, source=ticket.source, handle=ticket)
            ticket.state = TicketState.RELEASED
