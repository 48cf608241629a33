"""The collaborators of heron_py/common/net.py's Connection, each on its own: a port's
admission (conn_admission.Gate, with an injected timer), the refusal of a message a role may not
send (conn_dispatch.Dispatcher), the heartbeat timer (conn_liveness.LivenessTimer, with an
injected clock), and the TLS acceptor handing its admission to the connection it makes."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import pytest

from heron_py.common import tls
from heron_py.common.config import HeartbeatConfig
from heron_py.common.conn_admission import FailureLog, Gate, TicketState
from heron_py.common.conn_dispatch import Dispatcher, Routes, on_raw
from heron_py.common.conn_liveness import PING, LivenessTimer
from heron_py.common.framing import MsgType
from heron_py.common.guard import GuardLimits
from heron_py.common.net import BaseHandler, Counters, connect, serve

LOG = logging.getLogger("parts")


class Timers:
    """call_later by hand: ``fire()`` runs what is due."""

    def __init__(self) -> None:
        self.now = 0.0
        self.due: list[tuple[float, Any, tuple[Any, ...], Any]] = []

    def call_later(self, delay: float, fn: Any, *args: Any) -> Any:
        timers = self

        class Handle:
            cancelled = False

            def cancel(self) -> None:
                self.cancelled = True
                timers.due = [d for d in timers.due if d[3] is not self]

        handle = Handle()
        self.due.append((self.now + delay, fn, args, handle))
        return handle

    def advance(self, s: float) -> None:
        self.now += s
        ready = [d for d in self.due if d[0] <= self.now]
        self.due = [d for d in self.due if d[0] > self.now]
        for _, fn, args, _ in ready:
            fn(*args)


class Peer:
    def __init__(self, name: str) -> None:
        self.peer_name = name
        self.ended: list[str] = []

    def close(self, reason: str = "") -> None:
        self.ended.append(f"close {reason}")

    def abort(self, reason: str) -> None:
        self.ended.append(f"abort {reason}")


def test_a_gate_sheds_evicts_and_expires_and_releases_each_slot_once() -> None:
    counters, timers = Counters(), Timers()
    gate = Gate(GuardLimits(max_pending=2, max_connections=3, handshake_deadline_s=5.0), LOG, counters,
                call_later=timers.call_later)
    a, b, c = Peer("a"), Peer("b"), Peer("c")
    ta = gate.admit("h1", a)
    tb = gate.admit("h1", b)
    tc = gate.admit("h2", c)  # the pending slots are full: h1's oldest makes room
    assert (ta.state, tb.state, tc.state) == (TicketState.RELEASED, TicketState.PENDING, TicketState.PENDING)
    assert a.ended == ["abort evicted for a newer connection"] and counters.evicted == 1
    gate.closed(ta)  # its connection_lost: uncounted at eviction already
    assert gate.guard.pending == 2
    gate.authenticated(tb)
    assert tb.state is TicketState.OPEN and (gate.guard.pending, gate.guard.open) == (1, 1)
    assert gate.admit("h3", Peer("d")).state is TicketState.PENDING
    shed = gate.admit("h4", Peer("e"))  # 3 in all: over the port's cap
    assert (shed.state, shed.reason, counters.shed) == (TicketState.SHED, "too many connections", 1)
    timers.advance(5.0)  # c never authenticated; b did
    assert c.ended == ["close handshake deadline", "abort handshake deadline"] and b.ended == []
    assert counters.handshake_timeouts == 2  # c and d
    gate.closed(tc)
    gate.closed(tc)
    gate.closed(tb)
    assert (gate.guard.pending, gate.guard.open) == (1, 0)


def test_a_client_logs_each_failure_but_limits_what_a_man_in_the_middle_could_repeat(caplog) -> None:
    caplog.set_level(logging.WARNING)
    log = logging.getLogger("parts.client")
    failures = FailureLog(log)
    for _ in range(10):
        failures.warn("plain %s", 1)
        failures.warn("tagged %s", 2, kind="auth", always_limit=True)
    messages = [r.getMessage() for r in caplog.records if r.name == "parts.client"]
    assert messages.count("plain 1") == 10 and messages.count("tagged 2") == 5


class Conn:
    def __init__(self) -> None:
        self.peer_name, self.peer_role, self.identity = "10.0.0.1:5", "instance", None
        self.closed: list[str] = []

    def close(self, reason: str = "") -> None:
        self.closed.append(reason)


def test_the_dispatcher_gives_the_roles_table_and_refuses_the_rest(caplog) -> None:
    caplog.set_level(logging.WARNING)
    counters = Counters()
    routes = Routes("stmgr", [on_raw("instance", MsgType.TUPLE_BATCH, lambda conn, frame: None)])
    d = Dispatcher(routes, counters, FailureLog(LOG))
    assert list(d.table("instance")) == [MsgType.TUPLE_BATCH] and d.table("stmgr") == {}
    conn = Conn()
    d.refuse(conn, MsgType.ADMIN_REQUEST)  # type: ignore[arg-type]
    assert (counters.bad_frames, counters.bad_frame_role) == (1, 1)
    assert conn.closed == ["refused ADMIN_REQUEST from a instance"]
    assert "not a message a instance may send to the stmgr" in caplog.records[-1].getMessage()


class Transport:
    def __init__(self) -> None:
        self.reading = True

    def get_extra_info(self, name: str) -> None:
        return None

    def is_reading(self) -> bool:
        return self.reading

    def is_closing(self) -> bool:
        return False


class Open:
    is_open = True
    writing_paused = False
    peer_name = "peer"

    def __init__(self, transport: Transport) -> None:
        self.transport = transport
        self.bytes_in = self.bytes_out = 0
        self.sent: list[bytes] = []
        self.aborted: list[str] = []

    def send(self, frame: bytes) -> None:
        self.sent.append(frame)
        self.bytes_out += len(frame)

    def abort(self, reason: str) -> None:
        self.aborted.append(reason)


def test_the_liveness_timer_pings_when_idle_and_aborts_a_silent_peer_on_its_clock() -> None:
    timers, counters, tr = Timers(), Counters(), Transport()
    conn = Open(tr)
    live = LivenessTimer(conn, tr, HeartbeatConfig(interval_s=1.0, timeout_s=3.0), counters, LOG,  # type: ignore[arg-type]
                         clock=lambda: timers.now, call_later=timers.call_later)
    timers.advance(1.0)
    assert conn.sent == [PING]
    conn.bytes_in += 10  # the peer speaks
    timers.advance(1.0)
    timers.advance(1.0)
    timers.advance(1.0)
    assert conn.aborted == []  # silent for 2 s only
    live.paused()  # our backpressure: its silence is not judged meanwhile
    tr.reading = False
    timers.advance(5.0)
    assert conn.aborted == []
    tr.reading = True
    live.resumed()
    timers.advance(1.0)  # a whole interval of reading: judged, silent since t=2
    assert conn.aborted == ["silent for 8.0 s"] and counters.silent_peers == 1
    assert timers.due == []  # no tick after the abort
    live.stop()


@pytest.mark.asyncio
async def test_a_tls_port_admits_at_accept_and_hands_the_slot_to_the_connection() -> None:
    mat = tls.make_topology_tls("wc")
    counters = Counters()
    limits = GuardLimits(max_pending=1, handshake_deadline_s=5.0)
    server = await serve("127.0.0.1", 0, BaseHandler, b"s", role="test", log=LOG, counters=counters,
                         ssl=tls.server_context(mat), limits=limits)
    port = server.sockets[0].getsockname()[1]
    try:
        idle = socket.create_connection(("127.0.0.1", port))  # in its TLS handshake, forever
        await asyncio.sleep(0.1)
        conn = await connect("127.0.0.1", port, BaseHandler(), b"s", role="c", peer_id="1", log=LOG,
                             ssl=tls.client_context(mat, "wc"), server_hostname=tls.server_name("wc"))
        assert conn.is_open and counters.evicted == 1  # the idle one made room, in its TLS phase
        conn.close()
        # the slot the acceptor took at accept is the connection's: one more gets in
        again = await connect("127.0.0.1", port, BaseHandler(), b"s", role="c", peer_id="2", log=LOG,
                              ssl=tls.client_context(mat, "wc"), server_hostname=tls.server_name("wc"))
        assert again.is_open and counters.evicted == 1 and counters.handshake_timeouts == 0
        again.close()
        idle.close()
    finally:
        server.close()


def test_a_server_with_a_handler_per_role_gives_each_connection_its_proven_roles() -> None:
    """``ByRole``: the stream manager's one port, its instances' server and its peers'. Each
    accepted connection takes its peer role's handler when the handshake ends; a role with none
    gets the no-op defaults."""
    from heron_py.common.net import ByRole, Connection

    class _Seen(BaseHandler):
        def __init__(self) -> None:
            self.opened: list[str] = []
            self.closed: list[str] = []

        def on_open(self, conn: Connection) -> None:
            assert conn.identity is not None
            self.opened.append(conn.identity.peer_id)

        def on_close(self, conn: Connection) -> None:
            assert conn.identity is not None
            self.closed.append(conn.identity.peer_id)

    async def body() -> None:
        instances, peers = _Seen(), _Seen()
        by_role = ByRole({"instance": instances, "stmgr": peers})
        server = await serve("127.0.0.1", 0, lambda: by_role, b"s", role="stmgr", log=LOG, counters=Counters())
        port = server.sockets[0].getsockname()[1]
        try:
            conns = [await connect("127.0.0.1", port, BaseHandler(), b"s", role=role, peer_id=pid, log=LOG)
                     for role, pid in (("instance", "3"), ("stmgr", "1"), ("metricsmgr", "0"))]
            for _ in range(50):
                if instances.opened and peers.opened:
                    break
                await asyncio.sleep(0.01)
            assert (instances.opened, peers.opened) == (["3"], ["1"])
            for c in conns:
                c.close("done")
            for _ in range(100):
                if instances.closed and peers.closed:
                    break
                await asyncio.sleep(0.01)
            assert (instances.closed, peers.closed) == (["3"], ["1"])
        finally:
            server.close()

    asyncio.run(body())
