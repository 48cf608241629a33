"""The authentication handshake every connection starts with, sans-I/O.

Server (accepting side)            Client (connecting side)
  -- ServerHello(nonce_s, role_s, id_s) -->
                                   <-- ClientHello(nonce_c, role, id, mac_c)
  -- ServerAuth(mac_s)    -->
mac_c = HMAC(secret, "client" | nonce_s | nonce_c | role | id)
mac_s = HMAC(secret, "server" | nonce_c | nonce_s | role_s | id_s)

Both sides prove they hold the topology's secret over fresh nonces, so a recorded
handshake cannot be replayed. Both then derive the connection's session keys from the secret,
both nonces and both identities (``frameauth.session_keys``): every frame after the handshake
carries a tag under them, so a relay of the handshake gains nothing it could write with.
The server proves its identity as the client proves its own: a client that knows whom it
meant to reach (a stream manager of one container, the master) passes ``expect`` and refuses
any other server of the topology, such as another container's stream manager that took the
port an old location names.
Until a side reaches AUTHENTICATED it accepts only the next handshake message; anything else
fails the handshake. Nothing is unpickled before it.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from heron_py.common.frameauth import session_keys
from heron_py.common.framing import HEADER_SIZE, MsgType
from heron_py.common.wire import encode_msg
from proto import heron_py_pb2 as pb

NONCE_SIZE = 32


class HandshakeState(enum.Enum):
    START = "start"
    AWAIT_CLIENT_HELLO = "await_client_hello"  # server side
    AWAIT_SERVER_HELLO = "await_server_hello"  # client side
    AWAIT_SERVER_AUTH = "await_server_auth"  # client side
    AUTHENTICATED = "authenticated"
    FAILED = "failed"


class HandshakeError(Exception):
    pass


@dataclass(frozen=True)
class PeerIdentity:
    role: str
    peer_id: str


@dataclass(frozen=True)
class SessionKeys:
    """This side's keys for the frames after the handshake: what it sends, what it receives."""

    send: bytes
    recv: bytes


def _mac(secret: bytes, *parts: bytes) -> bytes:
    m = hmac.new(secret, digestmod=hashlib.sha256)
    for p in parts:
        # length-prefix each part so ("ab","c") and ("a","bc") differ
        m.update(len(p).to_bytes(4, "big"))
        m.update(p)
    return m.digest()


class ServerHandshake:
    def __init__(self, secret: bytes, server_role: str, peer: str,
                 nonce: Callable[[int], bytes] = os.urandom, *, server_id: str = "") -> None:
        self.state = HandshakeState.START
        self.identity: PeerIdentity | None = None
        self._secret = secret
        self._role = server_role
        self._id = server_id
        self._peer = peer
        self._nonce_s = nonce(NONCE_SIZE)
        self.keys: SessionKeys | None = None  # set once authenticated

    def start(self) -> bytes:
        if self.state is not HandshakeState.START:
            raise HandshakeError("handshake already started")
        self.state = HandshakeState.AWAIT_CLIENT_HELLO
        return encode_msg(pb.ServerHello(nonce=self._nonce_s, server_role=self._role, server_id=self._id))

    def on_frame(self, msg_type: int, frame: bytes) -> bytes:
        """Consumes the client's hello; returns the frame to send back. Raises on failure."""
        if self.state is not HandshakeState.AWAIT_CLIENT_HELLO:
            raise HandshakeError(f"unexpected frame from {self._peer} in handshake state {self.state.value}")
        if msg_type != MsgType.CLIENT_HELLO:
            self.state = HandshakeState.FAILED
            raise HandshakeError(
                f"peer {self._peer} sent message type {msg_type} before authenticating; "
                f"expected ClientHello ({int(MsgType.CLIENT_HELLO)})"
            )
        hello = pb.ClientHello()
        try:
            hello.ParseFromString(frame[HEADER_SIZE:])
        except DecodeError as e:
            self.state = HandshakeState.FAILED
            raise HandshakeError(f"peer {self._peer} sent a ClientHello that does not parse: {e}") from e
        expected = _mac(self._secret, b"client", self._nonce_s, hello.nonce,
                        hello.role.encode(), hello.peer_id.encode())
        if len(hello.nonce) != NONCE_SIZE or not hmac.compare_digest(expected, hello.mac):
            self.state = HandshakeState.FAILED
            raise HandshakeError(
                f"peer {self._peer} (claims role {hello.role!r}, id {hello.peer_id!r}) failed "
                f"authentication: wrong topology secret"
            )
        self.state = HandshakeState.AUTHENTICATED
        self.identity = PeerIdentity(hello.role, hello.peer_id)
        c2s, s2c = session_keys(self._secret, hello.nonce, self._nonce_s, hello.role, hello.peer_id, self._role,
                                self._id)
        self.keys = SessionKeys(send=s2c, recv=c2s)
        mac_s = _mac(self._secret, b"server", hello.nonce, self._nonce_s, self._role.encode(), self._id.encode())
        return encode_msg(pb.ServerAuth(mac=mac_s))


class ClientHandshake:
    def __init__(self, secret: bytes, role: str, peer_id: str, server: str,
                 nonce: Callable[[int], bytes] = os.urandom, *, expect: PeerIdentity | None = None) -> None:
        """``expect``: the server's role and id this client meant to reach; a server that names
        another is refused before our hello goes, and its proof (``mac_s``) covers what it named."""
        self.state = HandshakeState.AWAIT_SERVER_HELLO
        self._secret = secret
        self._role = role
        self._id = peer_id
        self._server = server
        self._expect = expect
        self._nonce_c = nonce(NONCE_SIZE)
        self._nonce_s = b""
        self._server_role = ""
        self._server_id = ""
        self.keys: SessionKeys | None = None  # set once authenticated

    @property
    def server_role(self) -> str:
        """The role the server named in its hello; proven once authenticated (its proof and the
        session keys are bound to it), so routes may be chosen by it."""
        return self._server_role

    @property
    def server_identity(self) -> PeerIdentity:
        """The server's role and id from its hello, proven once authenticated."""
        return PeerIdentity(self._server_role, self._server_id)

    def on_frame(self, msg_type: int, frame: bytes) -> bytes | None:
        """Returns a frame to send (the ClientHello) or None when authenticated. Raises on failure."""
        payload = frame[HEADER_SIZE:]
        if self.state is HandshakeState.AWAIT_SERVER_HELLO and msg_type == MsgType.SERVER_HELLO:
            hello = pb.ServerHello()
            try:
                hello.ParseFromString(payload)
            except DecodeError as e:
                self.state = HandshakeState.FAILED
                raise HandshakeError(f"server {self._server} sent a ServerHello that does not parse") from e
            if len(hello.nonce) != NONCE_SIZE:
                self.state = HandshakeState.FAILED
                raise HandshakeError(f"server {self._server} sent a nonce of {len(hello.nonce)} bytes, "
                                     f"expected {NONCE_SIZE}")
            self._nonce_s = hello.nonce
            self._server_role, self._server_id = hello.server_role, hello.server_id
            expect = self._expect
            if expect is not None and (expect.role, expect.peer_id) != (hello.server_role, hello.server_id):
                self.state = HandshakeState.FAILED
                raise HandshakeError(f"server {self._server} is {hello.server_role or 'of no role'} "
                                     f"{hello.server_id!r}, expected {expect.role} {expect.peer_id!r} (a stale "
                                     f"address, now another daemon's of the topology?)")
            mac = _mac(self._secret, b"client", self._nonce_s, self._nonce_c,
                       self._role.encode(), self._id.encode())
            self.state = HandshakeState.AWAIT_SERVER_AUTH
            return encode_msg(pb.ClientHello(nonce=self._nonce_c, role=self._role, peer_id=self._id, mac=mac))
        if self.state is HandshakeState.AWAIT_SERVER_AUTH and msg_type == MsgType.SERVER_AUTH:
            auth = pb.ServerAuth()
            try:
                auth.ParseFromString(payload)
            except DecodeError as e:
                self.state = HandshakeState.FAILED
                raise HandshakeError(f"server {self._server} sent a ServerAuth that does not parse") from e
            proof = _mac(self._secret, b"server", self._nonce_c, self._nonce_s, self._server_role.encode(),
                         self._server_id.encode())
            if not hmac.compare_digest(auth.mac, proof):
                self.state = HandshakeState.FAILED
                raise HandshakeError(f"server {self._server} failed authentication: wrong topology secret")
            self.state = HandshakeState.AUTHENTICATED
            c2s, s2c = session_keys(self._secret, self._nonce_c, self._nonce_s, self._role, self._id,
                                    self._server_role, self._server_id)
            self.keys = SessionKeys(send=c2s, recv=s2c)
            return None
        if msg_type == MsgType.AUTH_FAILED:
            self.state = HandshakeState.FAILED
            reason = pb.AuthFailed()
            try:
                reason.ParseFromString(payload)
            except DecodeError:
                pass
            raise HandshakeError(f"server {self._server} refused us: {reason.reason}")
        was = self.state
        self.state = HandshakeState.FAILED
        raise HandshakeError(f"server {self._server} sent message type {msg_type} in handshake state "
                             f"{was.value}")


def http_read_token(secret: bytes) -> str:
    """The bearer token that reads the master's HTTP API (off loopback, and a task's log from
    another user): derived from the topology secret, never the secret itself. A dashboard may
    hold it: it cannot act on the topology."""
    return hmac.new(secret, b"heron-py http read token", hashlib.sha256).hexdigest()


def http_admin_token(secret: bytes) -> str:
    """The bearer token of the master's page actions (activate, deactivate, restart, kill), which
    reads as well: derived apart from the read token, so that holding that one never acts."""
    return hmac.new(secret, b"heron-py http admin token", hashlib.sha256).hexdigest()


def scrape_token(secret: bytes) -> str:
    """The bearer token of the metrics managers' Prometheus endpoints: derived apart from the
    master's tokens, so a Prometheus server that holds it reads metrics and nothing else."""
    return hmac.new(secret, b"heron-py prometheus scrape token", hashlib.sha256).hexdigest()


def authorized(header: str | None, token: str | None) -> bool:
    """Whether an HTTP Authorization header carries ``token`` as a bearer token (always true
    when there is no token: an endpoint on loopback)."""
    if token is None:
        return True
    scheme, _, value = (header or "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.strip().encode(), token.encode())
