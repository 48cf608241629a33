"""Limits on what a listening port accepts before a peer has authenticated (pure, with an
injected clock; ``net`` applies them).

Before the handshake a peer has proven nothing, so it gets little: a connection must finish
the handshake within ``handshake_deadline_s``; its handshake frames may be at most
``PRE_AUTH_MAX_FRAME`` bytes (a ClientHello is under 200); a port holds at most
``max_connections`` in all, and sheds (closes at once) any beyond; failed handshakes are logged
at most once per ``log_interval_s``, with the count of those not logged, so a flood cannot fill
the disk.

At most ``max_pending`` connections may be in their handshake at once. A new one beyond that is
not refused: the source address holding the most pending slots gives up its oldest one, which is
aborted. Refusing the newcomer would let a few idle connections a second from one host keep a
port full, so that a restarted daemon or the CLI could never get in; with eviction a flooder has
to open connections faster than a real peer completes its handshake (milliseconds) to keep one
out, and one source can never hold the slots another needs.
"""

from __future__ import annotations

import enum
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

# the handshake's frames (ServerHello, ClientHello, ServerAuth, AuthFailed) are a few hundred bytes
PRE_AUTH_MAX_FRAME = 4096
HANDSHAKE_DEADLINE_S = 5.0
MAX_PENDING = 64
MAX_CONNECTIONS = 1024
LOG_INTERVAL_S = 10.0


class Admission(enum.Enum):
    ADMITTED = "admitted"
    TOO_MANY_PENDING = "too many connections in their handshake"
    TOO_MANY = "too many connections"


@dataclass(frozen=True)
class GuardLimits:
    max_pending: int = MAX_PENDING
    max_connections: int = MAX_CONNECTIONS
    handshake_deadline_s: float = HANDSHAKE_DEADLINE_S
    pre_auth_max_frame: int = PRE_AUTH_MAX_FRAME
    log_interval_s: float = LOG_INTERVAL_S


DEFAULT_LIMITS = GuardLimits()


class PortGuard:
    """One listening port's connection counts, its pending connections by source address, and
    what it shed or evicted. ``handle`` is whatever the caller aborts an evicted connection with."""

    def __init__(self, limits: GuardLimits | None = None) -> None:
        self.limits = limits or DEFAULT_LIMITS
        self.pending = 0  # accepted, handshake not done
        self.open = 0  # authenticated
        self.shed = 0  # refused at accept for a cap
        self.evicted = 0  # pending ones aborted to make room for a newer one
        self.timed_out = 0  # handshake deadline passed
        self._by_source: dict[str, OrderedDict[object, None]] = {}

    def admit(self, source: str = "", handle: object = None) -> tuple[Admission, object | None]:
        """A new accepted connection from ``source``: (verdict, a pending connection to abort
        now to make room for it, or None). Counted as pending when admitted."""
        if self.pending + self.open >= self.limits.max_connections:
            self.shed += 1
            return Admission.TOO_MANY, None
        victim: object | None = None
        if self.pending >= self.limits.max_pending:
            if not self._by_source:
                self.shed += 1
                return Admission.TOO_MANY_PENDING, None
            greedy = max(self._by_source, key=lambda s: len(self._by_source[s]))
            victim = self._take(greedy, None)
            self.evicted += 1
        self._by_source.setdefault(source, OrderedDict())[handle if handle is not None else object()] = None
        self.pending += 1
        return Admission.ADMITTED, victim

    def _take(self, source: str, handle: object | None) -> object | None:
        """Removes ``handle`` (or the oldest) from ``source``'s pending ones; returns it."""
        queue = self._by_source.get(source)
        if not queue:
            return None
        if handle is None:
            handle, _ = queue.popitem(last=False)
        elif handle in queue:
            del queue[handle]
        else:
            return None
        if not queue:
            del self._by_source[source]
        self.pending -= 1
        return handle

    def authenticated(self, source: str = "", handle: object = None) -> None:
        """A pending connection finished its handshake (``handle`` None: the source's oldest)."""
        self._take(source, handle)
        self.open += 1

    def closed(self, was_authenticated: bool, source: str = "", handle: object = None) -> None:
        """A connection ended; one evicted earlier was uncounted then, and is not again."""
        if was_authenticated:
            self.open -= 1
        else:
            self._take(source, handle)


class RateLimitedLog:
    """Warnings of each kind (by default the message's format): the first ``burst`` of an
    interval are logged, the rest counted, and the first logged after says how many were held
    back. A few distinct failures are all seen; a flood of one kind costs one line per interval."""

    MAX_KINDS = 64  # kinds remembered; beyond it the oldest kind is forgotten

    def __init__(self, log: logging.Logger, interval_s: float = LOG_INTERVAL_S, burst: int = 5,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = log
        self._interval = interval_s
        self._burst = burst
        self._clock = clock
        self._window: dict[str, tuple[float, int]] = {}  # kind -> (window start, logged in it)
        self._held: dict[str, int] = {}

    @property
    def suppressed(self) -> int:
        return sum(self._held.values())

    def warning(self, msg: str, *args: object, kind: str | None = None) -> bool:
        """Logs unless its kind used up its burst in this interval; returns whether it logged."""
        key = msg if kind is None else kind
        now = self._clock()
        start, logged = self._window.get(key, (now, 0))
        if now - start >= self._interval:
            start, logged = now, 0
        if logged >= self._burst:
            self._held[key] = self._held.get(key, 0) + 1
            return False
        if key not in self._window and len(self._window) >= self.MAX_KINDS:
            oldest = min(self._window, key=lambda k: self._window[k][0])
            del self._window[oldest]
            self._held.pop(oldest, None)
        self._window[key] = (start, logged + 1)
        held = self._held.pop(key, 0)
        if held:
            msg += f" ({held} similar not logged in the last {self._interval:g} s)"
        self._log.warning(msg, *args, stacklevel=2)  # the caller's line, not this one
        return True
