"""One reconnect loop for every long-lived outbound link of a daemon.

A link (stream manager -> topology master, stream manager -> metrics manager, metrics
manager -> topology master, instance -> stream manager) is the same loop everywhere:
connect, run a session while the connection lives, wait a little, connect again, and say
in the log why. ``run_link`` is that loop; a caller gives it two coroutines:

``connect()``
    returns an authenticated ``Connection`` (``net.connect``), or raises. It may wait first
    (for a location to appear, say). ``OSError`` (timeouts, refused), ``HandshakeError`` and
    ``Unreachable`` count as "not this time": the loop logs the reason and retries after
    ``retry_s``. Raise ``Unreachable("...")`` to choose the logged text yourself.
``session(conn)``
    runs while ``conn`` is open: registration, heartbeats, periodic reports. The loop cancels
    it (``CancelledError`` at its current ``await``) when the connection closes or ``stop``
    is set; if it returns, the loop closes the connection (close it yourself with a reason
    first, e.g. "the master moved"). It runs in the loop's own task.

``wait`` replaces the plain sleep between attempts; a daemon that follows a location passes
its "wait for a change, at most N seconds" so a new address cuts the wait short. Every wait
also ends when ``stop`` is set, and the loop returns then.

The loop learns that a connection closed by wrapping its handler (``conn.handler``) once:
the wrapper forwards every callback unchanged and then completes a future, so the caller's
handler needs no bookkeeping of its own for this.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from heron_py.common.guard import RateLimitedLog
from heron_py.common.handshake import HandshakeError
from heron_py.common.net import Connection, FrameHandler

ConnectFactory = Callable[[], Awaitable[Connection]]
Session = Callable[[Connection], Awaitable[None]]
Wait = Callable[[float], Awaitable[None]]


class Unreachable(Exception):
    """Raised by a connect factory: no connection this time. The message is logged as is."""


class _CloseWatch:
    """Forwards every callback to the link's own handler; completes ``closed`` on close."""

    def __init__(self, inner: FrameHandler, closed: asyncio.Future[None]) -> None:
        self.inner = inner
        self.closed = closed

    def on_open(self, conn: Connection) -> None:
        self.inner.on_open(conn)

    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        self.inner.on_frame(conn, msg_type, frame)

    def on_writing(self, conn: Connection, paused: bool) -> None:
        self.inner.on_writing(conn, paused)

    def on_close(self, conn: Connection) -> None:
        try:
            self.inner.on_close(conn)
        finally:
            if not self.closed.done():
                self.closed.set_result(None)


def watch_close(conn: Connection) -> asyncio.Future[None]:
    """A future that completes when ``conn`` closes (at once if it already has)."""
    closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    conn.handler = _CloseWatch(conn.handler, closed)
    # connect() returns a task step after the handshake: the connection may be gone already
    if not conn.is_open:
        closed.set_result(None)
    return closed


async def _interruptible(work: Awaitable[None], events: list[asyncio.Future[Any]]) -> None:
    """Awaits ``work`` in the current task until it ends or one of ``events`` completes; then
    it is cancelled (``CancelledError`` at its current ``await``) and this returns normally.

    ``work`` runs in the caller's task, not a task of its own: a daemon's loop ends right
    after it cancels its tasks, and a nested task would be left pending ("Task was destroyed
    but it is pending!"). A cancellation from outside still propagates."""
    task = asyncio.current_task()
    assert task is not None
    state = {"active": True, "interrupted": False}

    def interrupt(_: object) -> None:
        if state["active"] and not state["interrupted"]:
            state["interrupted"] = True
            task.cancel()

    for ev in events:
        ev.add_done_callback(interrupt)
    try:
        await work
    except asyncio.CancelledError:
        # ours if we interrupted and nobody else cancelled the task as well
        if not state["interrupted"] or task.uncancel() > 0:
            raise
    finally:
        state["active"] = False
        for ev in events:
            ev.remove_done_callback(interrupt)


async def _wait_or_stop(wait: Wait, seconds: float, stop: asyncio.Event) -> None:
    if stop.is_set():
        return
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await _interruptible(wait(seconds), [stopper])
    finally:
        stopper.cancel()


async def _run_session(conn: Connection, session: Session, stop: asyncio.Event, log: logging.Logger,
                       name: str) -> str | None:
    """Runs ``session(conn)`` until it returns, the connection closes or ``stop`` is set; then
    closes the connection. Returns why it ended: None when the other side (or the network)
    closed it, else the reason the connection was closed with on our side."""
    closed = watch_close(conn)
    stopper = asyncio.ensure_future(stop.wait())
    failure: BaseException | None = None
    try:
        await _interruptible(session(conn), [closed, stopper])
    except asyncio.CancelledError:
        conn.close("stopping")  # the daemon cancelled the link
        raise
    except Exception as e:
        failure = e
    finally:
        stopper.cancel()
    why = conn.close_reason  # set if the session closed it
    if failure is not None:
        # a bug in a session must not end the link for good: log it and reconnect
        log.error("session with %s failed: %r; reconnecting", name, failure)
        why = f"session failed: {failure!r}"
    elif why is None and not closed.done():
        why = "stopping" if stop.is_set() else "session ended"
    conn.close(why or "closed by the other side")
    return why


async def run_link(name: str, connect: ConnectFactory, session: Session, *, stop: asyncio.Event,
                   log: logging.Logger, retry_s: float = 0.5, reconnect_s: float = 0.2,
                   wait: Wait = asyncio.sleep) -> None:
    """Keeps a link to ``name`` ("topology master") up until ``stop`` is set; see the module
    docstring. A failure is logged (info) when its reason differs from the last one logged,
    so a peer that stays down does not fill the log; a lost connection is logged (warning), at
    most 5 times in 10 s with a count of the rest: a relay that changes frames cuts every new
    connection at once, and would have one line logged per attempt, 5 a second."""
    last_failure: str | None = None
    lost_log = RateLimitedLog(log)
    while not stop.is_set():
        try:
            conn = await connect()
        except Unreachable as e:
            reason = str(e)
        except (OSError, HandshakeError) as e:
            reason = f"{name} not reachable ({e or type(e).__name__}); retrying"
        else:
            last_failure = None
            why = await _run_session(conn, session, stop, log, name)
            if stop.is_set():
                return
            if why is None:
                lost_log.warning("connection to %s lost; reconnecting", name, kind="lost")
            else:
                lost_log.warning("connection to %s closed (%s); reconnecting", name, why, kind="closed")
            await _wait_or_stop(wait, reconnect_s, stop)
            continue
        if reason != last_failure:
            log.info("%s", reason)
            last_failure = reason
        await _wait_or_stop(wait, retry_s, stop)
