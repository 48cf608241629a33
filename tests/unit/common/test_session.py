"""The sans-I/O session (heron_py/common/session.py), with bytes only: the handshake both
ways, tagged frames, a wrong secret, a changed tag, frames in the same read as the handshake's
end, and the liveness rule."""

from __future__ import annotations

import pytest

from heron_py.common.framing import FrameAuthError, MsgType, encode_frame
from heron_py.common.handshake import HandshakeError, PeerIdentity
from heron_py.common.session import Opened, Session, Silence

SECRET = b"k" * 32


def _nonce(byte: int):  # type: ignore[no-untyped-def]
    return lambda n: bytes([byte]) * n


def _pair(client_secret: bytes = SECRET) -> tuple[Session, Session]:
    server = Session(SECRET, server_role="stmgr", peer="client", nonce=_nonce(1))
    client = Session(client_secret, server_role=None, client_role="instance", client_id="3", peer="server",
                     nonce=_nonce(2))
    return server, client


def _open(server: Session, client: Session) -> tuple[Opened, Opened]:
    step = client.receive(server.hello())
    assert step.opened is None and len(step.replies) == 1
    s_step = server.receive(step.replies[0])
    assert s_step.opened is not None and len(s_step.replies) == 1
    c_step = client.receive(s_step.replies[0])
    assert c_step.opened is not None and c_step.replies == ()
    return s_step.opened, c_step.opened


def test_the_handshake_proves_both_sides_and_frames_are_tagged_each_way() -> None:
    server, client = _pair()
    s_open, c_open = _open(server, client)
    assert s_open.identity == PeerIdentity("instance", "3") and s_open.peer_role == "instance"
    assert c_open.identity is None and c_open.peer_role == "stmgr"
    assert server.is_open and client.is_open
    frame = encode_frame(MsgType.TUPLE_BATCH, b"batch")
    assert server.receive(frame + c_open.send_mac.tag(frame)).frames == ((MsgType.TUPLE_BATCH, frame),)
    back = encode_frame(MsgType.ACK_RESULT, b"acks")
    assert client.receive(back + s_open.send_mac.tag(back)).frames == ((MsgType.ACK_RESULT, back),)


def test_a_wrong_secret_fails_the_handshake_with_one_line_and_a_refusal() -> None:
    server, client = _pair(client_secret=b"x" * 32)
    hello = client.receive(server.hello()).replies[0]
    with pytest.raises(HandshakeError) as e:
        server.receive(hello)
    assert str(e.value) == "peer client (claims role 'instance', id '3') failed authentication: wrong topology secret"
    refusal = server.refusal()
    assert refusal is not None and refusal[4:6] == int(MsgType.AUTH_FAILED).to_bytes(2, "big")
    assert client.refusal() is None
    with pytest.raises(HandshakeError, match=r"^server server refused us: authentication failed$"):
        client.receive(refusal)


def test_a_changed_tag_is_refused_after_the_good_frames_before_it() -> None:
    server, client = _pair()
    _, c_open = _open(server, client)
    good = encode_frame(MsgType.TUPLE_BATCH, b"one")
    bad = encode_frame(MsgType.TUPLE_BATCH, b"two")
    data = good + c_open.send_mac.tag(good) + bad + b"\x00" * 16
    assert server.receive(data).frames == ((MsgType.TUPLE_BATCH, good),)
    with pytest.raises(FrameAuthError, match=r"^frame 1 from client \(TUPLE_BATCH, 5 bytes\) failed authentication"):
        server.receive(b"")


def test_frames_in_the_same_read_as_the_handshakes_end_wait_for_the_key() -> None:
    server, client = _pair()
    hello = client.receive(server.hello()).replies[0]
    # the client's first frame needs its send key: open a twin pair to learn it, the nonces being fixed
    twin_server, twin_client = _pair()
    _, c_open = _open(twin_server, twin_client)
    first = encode_frame(MsgType.REGISTER_INSTANCE_REQUEST, b"")
    step = server.receive(hello + first + c_open.send_mac.tag(first))
    assert step.opened is not None and step.frames == () and step.more
    assert server.receive(b"").frames == ((MsgType.REGISTER_INSTANCE_REQUEST, first),)


def test_silence_pings_when_idle_and_aborts_a_peer_silent_for_the_timeout_while_reading() -> None:
    now = [0.0]

    def tick(bytes_in: int, bytes_out: int, *, reading: bool = True, writing_paused: bool = False):  # type: ignore[no-untyped-def]
        now[0] += 2.0
        return s.tick(bytes_in, bytes_out, reading=reading, writing_paused=writing_paused)

    s = Silence(2.0, 6.0, 0, 0, clock=lambda: now[0])
    v = tick(0, 0)
    assert (v.ping, v.abort, v.silent_s) == (True, False, 2.0)
    s.mark(0, 21)  # our ping went out
    v = tick(10, 21)  # the peer spoke; so did we (the ping)
    assert (v.ping, v.abort, v.silent_s) == (True, False, 0.0)
    s.mark(10, 21)
    v = tick(10, 21, reading=False, writing_paused=True)  # paused reads: not judged, its pings may wait unread
    assert (v.ping, v.abort, v.silent_s) == (False, False, 2.0)
    s.mark(10, 21)
    assert not tick(10, 21).abort  # reading again, but not for a whole interval yet
    v = tick(10, 21)
    assert (v.abort, v.silent_s) == (True, 6.0)  # the pause counted: nothing waited in the kernel
