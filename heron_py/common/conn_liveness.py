"""A connection's heartbeats and silence check on a timer (the rule is ``session.Silence``,
pure; this runs it against one open ``net.Connection``).

Every ``interval_s``: a ping when we sent nothing since the last tick, an abort when the peer
sent nothing for ``timeout_s`` though we could read it. The byte counts are compared at each
tick, so the per-frame path pays nothing for it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING

from heron_py.common.config import HeartbeatConfig
from heron_py.common.framing import MsgType, encode_frame
from heron_py.common.session import Silence

if TYPE_CHECKING:  # an annotation only: net imports this module
    from heron_py.common.net import Connection, Counters

PING = encode_frame(MsgType.LINK_PING, b"")


def set_tcp_keepalive(transport: asyncio.BaseTransport, idle_s: int = 10, interval_s: int = 5, count: int = 3) -> None:
    """Kernel keepalives on a TCP socket as well: they also end a connection whose process is
    gone with its host, when our own heartbeats cannot run (the process is frozen)."""
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


class LivenessTimer:
    """One open connection's heartbeat timer. ``clock`` and ``call_later`` are the event loop's
    (injected: the silence is elapsed time on that clock, never a count of ticks)."""

    def __init__(self, conn: Connection, transport: asyncio.Transport, config: HeartbeatConfig, counters: Counters,
                 log: logging.Logger, *, clock: Callable[[], float],
                 call_later: Callable[..., asyncio.TimerHandle]) -> None:
        self._conn = conn
        self._interval = config.interval_s
        self._counters = counters
        self._log = log
        self._call_later = call_later
        set_tcp_keepalive(transport)
        self._silence = Silence(config.interval_s, config.timeout_s, conn.bytes_in, conn.bytes_out,
                                clock=clock, reading=transport.is_reading())
        self._timer: asyncio.TimerHandle | None = call_later(self._interval, self._tick)

    def paused(self) -> None:
        """We stopped reading: what the peer sends now waits unseen, not judged meanwhile."""
        self._silence.paused()

    def resumed(self) -> None:
        self._silence.resumed()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _tick(self) -> None:
        self._timer = None
        conn = self._conn
        tr = conn.transport
        if not conn.is_open or tr is None or tr.is_closing():
            return
        verdict = self._silence.tick(conn.bytes_in, conn.bytes_out, reading=tr.is_reading(),
                                     writing_paused=conn.writing_paused)
        if verdict.abort:
            self._counters.silent_peers += 1
            self._log.warning("dropping connection: %s sent nothing for %.1f s (frozen, or its host is gone)",
                              conn.peer_name, verdict.silent_s)
            conn.abort(f"silent for {verdict.silent_s:.1f} s")
            return
        if verdict.ping:
            conn.send(PING)
        self._silence.mark(conn.bytes_in, conn.bytes_out)
        self._timer = self._call_later(self._interval, self._tick)
