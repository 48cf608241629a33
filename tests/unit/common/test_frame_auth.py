"""Every frame after the handshake is authenticated (heron_py.common.frameauth), and a silent
peer is aborted (net.Liveness): on real sockets on 127.0.0.1, with a man in the middle that
relays the real handshake and then changes, injects or replays frames."""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import struct

import pytest

from heron_py.common.frameauth import TAG_SIZE, FrameMac, session_keys
from heron_py.common.framing import BODY_OFFSET, FrameAuthError, FrameDecoder, MsgType, encode_batch_frame, encode_frame
from heron_py.common.net import BaseHandler, Counters, Liveness, connect, serve
from tests.support import until

SECRET = b"topology-secret"
LOG = logging.getLogger("test_frame_auth")
_HDR = struct.Struct(">IH")


class Recorder(BaseHandler):
    def __init__(self) -> None:
        self.frames: list[tuple[int, bytes]] = []
        self.closed = asyncio.Event()

    def on_frame(self, conn, msg_type, frame):
        self.frames.append((msg_type, frame))

    def on_close(self, conn):
        self.closed.set()


class Mitm:
    """A TCP relay between a client and the real server. It forwards the handshake unchanged
    (it cannot make one of its own: it lacks the secret), then applies ``tamper`` to each
    whole client→server frame after the handshake: a list of byte strings to send instead."""

    def __init__(self, target_port: int, tamper) -> None:
        self.target_port = target_port
        self.tamper = tamper
        self.server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def _relay(self, c_reader, c_writer) -> None:
        s_reader, s_writer = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def down() -> None:  # server -> client, unchanged
            while data := await s_reader.read(65536):
                c_writer.write(data)
            c_writer.close()

        async def up() -> None:  # client -> server, frame by frame
            buf = b""
            seen = 0
            while data := await c_reader.read(65536):
                buf += data
                while len(buf) >= 6:
                    length, _ = _HDR.unpack_from(buf)
                    tag = TAG_SIZE if seen else 0  # the ClientHello is the one untagged frame
                    total = 4 + length + tag
                    if len(buf) < total:
                        break
                    whole, buf = buf[:total], buf[total:]
                    out = [whole] if not seen else self.tamper(whole)
                    seen += 1
                    for chunk in out:
                        s_writer.write(chunk)
            s_writer.close()

        await asyncio.gather(down(), up(), return_exceptions=True)


async def _setup(tamper, liveness: Liveness | None = None):
    rec = Recorder()
    counters = Counters()
    server = await serve("127.0.0.1", 0, lambda: rec, SECRET, role="stmgr", log=LOG, counters=counters,
                         liveness=liveness or Liveness())
    mitm = Mitm(server.sockets[0].getsockname()[1], tamper)
    await mitm.start()
    client = await connect("127.0.0.1", mitm.port, BaseHandler(), SECRET, role="instance", peer_id="3", log=LOG)
    return rec, counters, server, mitm, client


async def test_a_relayed_connection_carries_unchanged_frames() -> None:
    rec, counters, server, _mitm, client = await _setup(lambda whole: [whole])
    client.send(encode_frame(MsgType.ADMIN_REQUEST, b"hello"))
    client.send(encode_frame(MsgType.ADMIN_REQUEST, b"world"))
    await until(lambda: len(rec.frames) == 2, 5.0)
    assert [f[6:] for _, f in rec.frames] == [b"hello", b"world"]
    assert counters.bad_frame_auth == 0
    client.close()
    server.close()


async def test_a_word_changed_in_the_middle_is_never_delivered_and_the_connection_is_aborted(caplog) -> None:
    def change(whole: bytes) -> list[bytes]:
        return [whole.replace(b"hello", b"jello")]

    rec, counters, server, _mitm, client = await _setup(change)
    client.send(encode_frame(MsgType.ADMIN_REQUEST, b"first"))
    client.send(encode_frame(MsgType.ADMIN_REQUEST, b"hello"))
    await asyncio.wait_for(rec.closed.wait(), 5)
    assert [f[6:] for _, f in rec.frames] == [b"first"]  # "jello" never reached the handler
    assert counters.bad_frame_auth == 1
    assert any("frame 1 from" in r.getMessage() and "ADMIN_REQUEST, 7 bytes) failed authentication" in r.getMessage()
               for r in caplog.records)
    server.close()


async def test_an_injected_tuple_batch_is_never_unpickled(tmp_path) -> None:
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    body = pickle.dumps(Evil())
    injected = encode_batch_frame(1, 3, body, MsgType.TUPLE_BATCH, 1) + os.urandom(TAG_SIZE)

    def inject(whole: bytes) -> list[bytes]:
        return [injected, whole]  # before the client's own frame, with a guessed tag

    rec, counters, server, _mitm, client = await _setup(inject)
    client.send(encode_frame(MsgType.ADMIN_REQUEST, b"x"))
    await asyncio.wait_for(rec.closed.wait(), 5)
    assert rec.frames == []
    assert counters.bad_frame_auth == 1
    assert not marker.exists()
    server.close()


async def test_a_replayed_frame_fails_its_sequence_number() -> None:
    rec, counters, server, _mitm, client = await _setup(lambda whole: [whole, whole])
    client.send(encode_frame(MsgType.ADMIN_REQUEST, b"once"))
    await asyncio.wait_for(rec.closed.wait(), 5)
    assert [f[6:] for _, f in rec.frames] == [b"once"]
    assert counters.bad_frame_auth == 1
    server.close()


async def test_a_silent_peer_is_aborted_and_a_paused_reader_is_not() -> None:
    rec = Recorder()
    counters = Counters()
    fast = Liveness(interval_s=0.1, timeout_s=0.5)
    server = await serve("127.0.0.1", 0, lambda: rec, SECRET, role="stmgr", log=LOG, counters=counters,
                         liveness=fast)
    port = server.sockets[0].getsockname()[1]
    # a client that never pings (its heartbeats off) is silent: aborted after the timeout
    mute = await connect("127.0.0.1", port, BaseHandler(), SECRET, role="instance", peer_id="1", log=LOG,
                         liveness=Liveness(timeout_s=0))
    await asyncio.wait_for(rec.closed.wait(), 3)
    assert counters.silent_peers == 1
    assert mute.close_reason is None  # the server ended it, not the client
    # a live client pings: never aborted; nor is one whose reads the server paused itself
    rec2 = Recorder()
    server2 = await serve("127.0.0.1", 0, lambda: rec2, SECRET, role="stmgr", log=LOG, counters=counters,
                          liveness=fast)
    opened: list = []
    rec2.on_open = opened.append  # type: ignore[method-assign]
    await connect("127.0.0.1", server2.sockets[0].getsockname()[1], BaseHandler(), SECRET, role="instance",
                  peer_id="2", log=LOG, liveness=fast)
    muted = await connect("127.0.0.1", server2.sockets[0].getsockname()[1], BaseHandler(), SECRET,
                          role="instance", peer_id="3", log=LOG, liveness=Liveness(timeout_s=0))
    await until(lambda: len(opened) == 2, 5.0)
    opened[1].pause_reading()  # backpressure: our own pause is not the peer's silence
    await asyncio.sleep(1.2)
    assert not rec2.closed.is_set()
    assert counters.silent_peers == 1
    muted.close()
    server.close()
    server2.close()


def test_keys_differ_per_direction_nonce_and_role() -> None:
    n1, n2 = os.urandom(32), os.urandom(32)
    c2s, s2c = session_keys(SECRET, n1, n2, "instance", "3", "stmgr")
    assert c2s != s2c
    assert session_keys(SECRET, n1, n2, "instance", "3", "stmgr") == (c2s, s2c)
    assert session_keys(SECRET, n2, n1, "instance", "3", "stmgr")[0] != c2s
    assert session_keys(SECRET, n1, n2, "instance", "4", "stmgr")[0] != c2s
    assert session_keys(SECRET, n1, n2, "stmgr", "3", "stmgr")[0] != c2s
    assert session_keys(b"other", n1, n2, "instance", "3", "stmgr")[0] != c2s


def test_decoder_checks_each_tag_in_order_and_stops_at_the_handshake_boundary() -> None:
    key = os.urandom(32)
    tx = FrameMac(key)
    hello = encode_frame(MsgType.CLIENT_HELLO, b"h")
    a, b = encode_frame(MsgType.ADMIN_REQUEST, b"a"), encode_frame(MsgType.ADMIN_REQUEST, b"b")
    wire = hello + a + tx.tag(a) + b + tx.tag(b)
    dec = FrameDecoder("peer", pre_auth_frames=1, authenticated=True)
    assert dec.feed(wire) == [(MsgType.CLIENT_HELLO, hello)]  # no keys yet: the rest waits
    dec.mac = FrameMac(key)
    assert dec.feed(b"") == [(MsgType.ADMIN_REQUEST, a), (MsgType.ADMIN_REQUEST, b)]
    # the same frame again (a replay) has the wrong sequence number
    with pytest.raises(FrameAuthError, match=r"^frame 2 from peer \(ADMIN_REQUEST, 3 bytes\) failed authentication"):
        dec.feed(a + FrameMac(key).tag(a))
    assert BODY_OFFSET == 18
