"""Limits before authentication (heron_py/common/guard.py): a handshake deadline, a small
pre-auth frame limit, a connection cap per port, rate-limited logging of failed handshakes
(issue 18, defect 5)."""

import asyncio
import logging
import struct

import pytest

from heron_py.common.framing import HEADER, FrameDecoder, FrameError, MsgType, encode_frame
from heron_py.common.guard import Admission, GuardLimits, PortGuard, RateLimitedLog
from heron_py.common.net import BaseHandler, Counters, connect, serve

SECRET = b"s" * 32
LOG = logging.getLogger("test-preauth")


def test_a_port_guard_sheds_over_its_caps_and_frees_on_close():
    g = PortGuard(GuardLimits(max_pending=2, max_connections=3))
    a, b, c, d = object(), object(), object(), object()
    assert g.admit("h1", a) == (Admission.ADMITTED, None) and g.admit("h1", b) == (Admission.ADMITTED, None)
    # the handshake slots are full: the newcomer gets in, the source holding the most slots
    # gives up its oldest (issue 34, item 5: idle connections cannot keep a port full)
    assert g.admit("h2", c) == (Admission.ADMITTED, a)
    assert g.pending == 2 and g.evicted == 1
    g.closed(was_authenticated=False, source="h1", handle=a)  # the evicted one's close counts nothing again
    assert g.pending == 2
    g.authenticated("h1", b)
    assert g.admit("h3", d) == (Admission.ADMITTED, None)  # 1 open + 2 pending
    assert g.admit("h3", object()) == (Admission.TOO_MANY, None)
    g.closed(was_authenticated=False, source="h3", handle=d)
    assert g.admit("h3", object())[0] is Admission.ADMITTED and g.shed == 1


def test_one_source_cannot_take_the_slots_another_needs():
    g = PortGuard(GuardLimits(max_pending=4, max_connections=100))
    flood = [object() for _ in range(4)]
    for h in flood:
        g.admit("10.0.0.9", h)
    peer = object()
    assert g.admit("10.0.0.2", peer) == (Admission.ADMITTED, flood[0])
    # the flooder's next ones evict its own oldest, never the other source's only slot
    for i in range(1, 4):
        assert g.admit("10.0.0.9", object()) == (Admission.ADMITTED, flood[i])
    g.authenticated("10.0.0.2", peer)
    assert g.open == 1 and g.pending == 3


def test_failed_handshakes_are_logged_once_per_interval_with_a_count(caplog):
    now = [0.0]
    rl = RateLimitedLog(LOG, 10.0, burst=2, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger=LOG.name):
        assert rl.warning("bad peer %s", "a") and rl.warning("bad peer %s", "b")
        assert not any(rl.warning("bad peer %s", "x") for _ in range(99))
        assert rl.warning("bad frame from %s", "d")  # another kind has its own burst
        now[0] = 10.0
        assert rl.warning("bad peer %s", "c")
    assert [r.getMessage() for r in caplog.records] == [
        "bad peer a", "bad peer b", "bad frame from d", "bad peer c (99 similar not logged in the last 10 s)"]


def test_a_large_length_prefix_before_authentication_is_refused_at_its_header():
    d = FrameDecoder("p", 16 * 1024 * 1024, pre_auth_frames=1, pre_auth_max=4096)
    with pytest.raises(FrameError, match="announces 16777216 bytes before authenticating, over the limit of 4096"):
        d.feed(HEADER.pack(16 * 1024 * 1024, MsgType.CLIENT_HELLO))


def test_after_the_handshake_frames_the_full_limit_applies_even_in_the_same_read():
    d = FrameDecoder("p", 1 << 20, pre_auth_frames=1, pre_auth_max=4096)
    hello, big = encode_frame(MsgType.CLIENT_HELLO, b"h"), encode_frame(MsgType.ADMIN_REQUEST, b"x" * 10000)
    assert [t for t, _ in d.feed(hello + big)] == [MsgType.CLIENT_HELLO, MsgType.ADMIN_REQUEST]


async def _closed_within(reader: asyncio.StreamReader, secs: float) -> bool:
    try:
        while True:
            data = await asyncio.wait_for(reader.read(65536), secs)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_a_port_sheds_idle_and_hostile_connections_and_still_serves_a_real_peer():
    async def run():
        counters = Counters()
        limits = GuardLimits(max_pending=3, max_connections=10, handshake_deadline_s=0.5)
        server = await serve("127.0.0.1", 0, BaseHandler, SECRET, role="test", log=LOG, counters=counters,
                             limits=limits)
        port = server.sockets[0].getsockname()[1]
        idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(5)]
        await asyncio.sleep(0.1)
        assert counters.evicted == 2 and counters.shed == 0  # over the 3 pending: the oldest made room
        # a peer with the secret gets in while the slots are full of idle connections
        first = await connect("127.0.0.1", port, BaseHandler(), SECRET, role="c", peer_id="0", log=LOG)
        assert first.is_open and counters.evicted == 3
        first.close()
        # the others are closed at the deadline
        assert all([await _closed_within(r, 1.5) for r, _ in idle])
        assert counters.handshake_timeouts == 2
        # a 16 MiB length prefix with no handshake: closed at once, nothing buffered
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(struct.pack(">IH", 16 * 1024 * 1024, MsgType.CLIENT_HELLO))
        assert await _closed_within(r, 0.3)
        assert counters.bad_frames == 1
        # a peer with the secret still gets in
        conn = await connect("127.0.0.1", port, BaseHandler(), SECRET, role="c", peer_id="1", log=LOG)
        assert conn.is_open
        await asyncio.sleep(0.7)  # past the deadline: an authenticated connection stays
        assert conn.is_open
        conn.close()
        for _, w in idle:
            w.close()
        server.close()

    asyncio.run(run())
