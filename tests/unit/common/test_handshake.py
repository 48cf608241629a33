"""The secret handshake (heron_py/common/handshake.py) as two state machines over frames: the
same secret authenticates both sides; a wrong secret, a server without it, data before
authentication and a replayed hello each fail."""

import itertools

import pytest

from heron_py.common.framing import FrameDecoder, MsgType, encode_frame
from heron_py.common.handshake import ClientHandshake, HandshakeError, HandshakeState, ServerHandshake


def _one(frame):
    [(t, f)] = FrameDecoder("x").feed(frame)
    return t, f


def _nonces():
    counter = itertools.count()
    return lambda n: bytes([next(counter) % 256]) * n


def test_both_sides_authenticate_with_the_same_secret():
    s = ServerHandshake(b"secret", "stmgr", "client", nonce=_nonces())
    c = ClientHandshake(b"secret", "instance", "3", "server")
    hello = c.on_frame(*_one(s.start()))
    assert c.state is HandshakeState.AWAIT_SERVER_AUTH
    auth = s.on_frame(*_one(hello))
    assert s.state is HandshakeState.AUTHENTICATED
    assert s.identity is not None and (s.identity.role, s.identity.peer_id) == ("instance", "3")
    assert c.on_frame(*_one(auth)) is None
    assert c.state is HandshakeState.AUTHENTICATED


def test_wrong_secret_fails_on_the_server_with_a_clear_error():
    s = ServerHandshake(b"secret", "stmgr", "127.0.0.1:4000")
    c = ClientHandshake(b"other", "instance", "3", "server")
    hello = c.on_frame(*_one(s.start()))
    with pytest.raises(HandshakeError) as e:
        s.on_frame(*_one(hello))
    assert str(e.value) == ("peer 127.0.0.1:4000 (claims role 'instance', id '3') failed authentication: "
                            "wrong topology secret")
    assert s.state is HandshakeState.FAILED


def test_server_that_does_not_know_the_secret_is_rejected_by_the_client():
    real = ServerHandshake(b"secret", "stmgr", "c")
    c = ClientHandshake(b"secret", "instance", "3", "evil:1")
    c.on_frame(*_one(real.start()))
    forged = encode_frame(MsgType.SERVER_AUTH, b"\x0a\x20" + b"\x00" * 32)
    with pytest.raises(HandshakeError) as e:
        c.on_frame(*_one(forged))
    assert str(e.value) == "server evil:1 failed authentication: wrong topology secret"


def test_data_before_authentication_fails_the_handshake():
    s = ServerHandshake(b"secret", "stmgr", "p")
    s.start()
    with pytest.raises(HandshakeError) as e:
        s.on_frame(MsgType.TUPLE_BATCH, encode_frame(MsgType.TUPLE_BATCH, b"\x00" * 8))
    assert str(e.value) == "peer p sent message type 100 before authenticating; expected ClientHello (2)"
    assert s.state is HandshakeState.FAILED


def test_replayed_client_hello_does_not_authenticate_a_new_connection():
    s1 = ServerHandshake(b"secret", "stmgr", "p")
    c = ClientHandshake(b"secret", "instance", "3", "s")
    hello = c.on_frame(*_one(s1.start()))
    s1.on_frame(*_one(hello))
    s2 = ServerHandshake(b"secret", "stmgr", "p")  # fresh nonce
    s2.start()
    with pytest.raises(HandshakeError):
        s2.on_frame(*_one(hello))
