"""Mutual TLS for daemon connections (heron_py.common.tls and net's ssl options) on real
sockets on 127.0.0.1, under both loops the engine runs on (asyncio's and uvloop, the daemons')."""

import asyncio
import datetime
import logging
import os
import socket
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from cryptography.x509.oid import ExtendedKeyUsageOID

from heron_py.common import tls
from heron_py.common.framing import MsgType, encode_frame
from heron_py.common.handshake import HandshakeError
from heron_py.common.net import BaseHandler, Counters, connect, serve

SECRET = b"s3cret"
TOPO = "wc"


@pytest.fixture(scope="module")
def material():
    return tls.make_topology_tls(TOPO)


@pytest.fixture(scope="module")
def foreign():
    """Material of another topology with the same name: another CA."""
    return tls.make_topology_tls(TOPO)


@pytest.fixture(scope="module", params=["asyncio", "uvloop"])
def event_loop_policy(request):
    if request.param == "uvloop":
        import uvloop

        return uvloop.EventLoopPolicy()
    return asyncio.DefaultEventLoopPolicy()


class Server:
    """A server recording the frames it receives (and echoing them back) and its log."""

    def __init__(self, ctx, **kw):
        self.ctx = ctx
        self.kw = kw
        self.frames = []
        self.opened = []
        self.counters = Counters()
        self.server = None

    async def start(self):
        outer = self

        class H(BaseHandler):
            def on_open(self, conn):
                outer.opened.append(conn)

            def on_frame(self, conn, msg_type, frame):
                outer.frames.append((msg_type, frame))
                conn.send(frame)

        self.server = await serve("127.0.0.1", 0, H, SECRET, role="test", log=logging.getLogger("srv"),
                                  counters=self.counters, ssl=self.ctx, **self.kw)
        return self.server.sockets[0].getsockname()[1]

    def close(self):
        self.server.close()


class Client(BaseHandler):
    def __init__(self):
        self.frames = []

    def on_frame(self, conn, msg_type, frame):
        self.frames.append((msg_type, frame))


async def until(cond, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


def tls_client(port, mat, handler=None, topology=TOPO, counters=None, timeout=5.0):
    return connect("127.0.0.1", port, handler or BaseHandler(), SECRET, role="client", peer_id="1",
                   log=logging.getLogger("cli"), ssl=tls.client_context(mat, topology),
                   server_hostname=tls.server_name(topology), counters=counters, timeout=timeout)


async def closed_by_peer(sock):
    """True once the server closed the socket (EOF, or a reset: an alert it sent unread)."""
    try:
        return await asyncio.wait_for(asyncio.get_running_loop().sock_recv(sock, 4096), 2) == b""
    except ConnectionResetError:
        return True


def warnings_about_tls(caplog, logger):
    return [r.getMessage() for r in caplog.records
            if r.name == logger and r.levelno == logging.WARNING and "TLS with" in r.getMessage()]


async def test_frames_flow_both_ways_over_mutual_tls_and_the_secret_handshake_still_runs(material):
    srv = Server(tls.server_context(material))
    port = await srv.start()
    try:
        handler = Client()
        conn = await tls_client(port, material, handler)
        assert conn.is_open
        ssl_obj = conn.transport.get_extra_info("ssl_object")
        assert ssl_obj is not None and ssl_obj.version() == "TLSv1.3"
        frame = encode_frame(MsgType.ADMIN_REQUEST, b"hello over tls")
        conn.send(frame)
        await until(lambda: handler.frames)
        assert srv.frames == [(MsgType.ADMIN_REQUEST, frame)]
        assert handler.frames == [(MsgType.ADMIN_REQUEST, frame)]
        [accepted] = srv.opened
        # the HMAC handshake ran inside TLS: the server knows the client's role and id
        assert (accepted.identity.role, accepted.identity.peer_id) == ("client", "1")
        # mutual: the server saw the client's certificate, the topology's
        peer = accepted.transport.get_extra_info("peercert")
        assert ("DNS", tls.server_name(TOPO)) in peer["subjectAltName"]
        assert srv.counters.auth_failures == 0
        conn.close()
    finally:
        srv.close()


async def test_a_client_with_another_topologys_ca_is_refused_counted_and_logged_once(material, foreign, caplog):
    caplog.set_level(logging.WARNING)
    srv = Server(tls.server_context(material))
    port = await srv.start()
    try:
        client_counters = Counters()
        with pytest.raises(ConnectionError, match="certificate verify failed"):
            await tls_client(port, foreign, counters=client_counters)
        assert client_counters.auth_failures == 1
        await until(lambda: srv.counters.auth_failures == 1)
        await asyncio.sleep(0.1)  # nothing counts it twice (start_tls and connection_lost both hear it)
        assert srv.counters.auth_failures == 1
        assert srv.opened == [] and srv.frames == []
        [logged] = warnings_about_tls(caplog, "srv")
        # the client closes (asyncio and uvloop do not flush its alert), or sends an alert
        assert "127.0.0.1:" in logged
        assert "closed the connection during the TLS handshake" in logged or "refused the TLS" in logged
        # the server keeps serving
        conn = await tls_client(port, material)
        assert conn.is_open
        conn.close()
    finally:
        srv.close()


async def test_a_client_whose_certificate_the_server_refuses_fails_and_the_server_counts_it(material, foreign,
                                                                                              caplog):
    # the client trusts the server (right CA) but presents a certificate of another CA: under
    # TLS 1.3 the client's handshake completes before the server refuses it
    caplog.set_level(logging.WARNING)
    srv = Server(tls.server_context(material))
    port = await srv.start()
    try:
        impostor = tls.TlsMaterial(ca_cert=material.ca_cert, cert=foreign.cert, key=foreign.key)
        client_counters = Counters()
        with pytest.raises(ConnectionError, match=r"TLS with 127\.0\.0\.1:\d+ failed: .*refused our certificate"):
            await tls_client(port, impostor, counters=client_counters)
        assert client_counters.auth_failures == 1
        await until(lambda: srv.counters.auth_failures == 1)
        [logged] = warnings_about_tls(caplog, "srv")
        assert "certificate verify failed" in logged
        assert len(warnings_about_tls(caplog, "cli")) == 1
        assert srv.opened == []
    finally:
        srv.close()


async def test_a_plain_tcp_client_on_a_tls_port_is_refused_and_counted_and_good_clients_still_served(
        material, caplog):
    caplog.set_level(logging.WARNING)
    srv = Server(tls.server_context(material))
    port = await srv.start()
    try:
        # a daemon without TLS: it waits for the server's hello, which never comes in clear
        with pytest.raises((TimeoutError, asyncio.TimeoutError)):
            await connect("127.0.0.1", port, BaseHandler(), SECRET, role="client", peer_id="1",
                          log=logging.getLogger("cli"), timeout=0.5)
        await until(lambda: srv.counters.auth_failures == 1)
        # a peer that sends a frame in clear
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.sendall(encode_frame(MsgType.CLIENT_HELLO, b"x" * 40))
            s.setblocking(False)
            await until(lambda: srv.counters.auth_failures == 2)
            assert await closed_by_peer(s)
        logged = warnings_about_tls(caplog, "srv")
        assert len(logged) == 2
        assert "closed the connection during the TLS handshake" in logged[0]
        assert "does not speak TLS" in logged[1]
        conn = await tls_client(port, material)
        assert conn.is_open and len(srv.opened) == 1
        conn.close()
        assert srv.counters.auth_failures == 2
    finally:
        srv.close()


async def test_a_tls_handshake_that_never_starts_is_dropped_after_the_timeout(material, caplog):
    caplog.set_level(logging.WARNING)
    srv = Server(tls.server_context(material), tls_handshake_timeout=0.3)
    port = await srv.start()
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setblocking(False)
            await until(lambda: srv.counters.auth_failures == 1, timeout=3)
            assert await closed_by_peer(s)
        [logged] = warnings_about_tls(caplog, "srv")
        assert "timed out" in logged or "taking longer" in logged
    finally:
        srv.close()


async def test_a_tls_client_to_a_plain_server_fails_with_a_clear_error(material):
    srv = Server(None)
    port = await srv.start()
    try:
        with pytest.raises(ConnectionError, match=r"TLS with 127\.0\.0\.1:\d+ failed: the peer does not speak TLS"):
            await tls_client(port, material)
        assert srv.opened == []
    finally:
        srv.close()


async def test_the_client_checks_the_servers_name(material):
    srv = Server(tls.server_context(material))
    port = await srv.start()
    try:
        with pytest.raises(ValueError, match="server_hostname"):
            await connect("127.0.0.1", port, BaseHandler(), SECRET, role="client", peer_id="1",
                          log=logging.getLogger("cli"), ssl=tls.client_context(material, TOPO))
        with pytest.raises(ConnectionError, match="Hostname mismatch"):
            await connect("127.0.0.1", port, BaseHandler(), SECRET, role="client", peer_id="1",
                          log=logging.getLogger("cli"), ssl=tls.client_context(material, TOPO),
                          server_hostname="heron-py.other")
        await until(lambda: srv.counters.auth_failures == 1)  # the first never connected
    finally:
        srv.close()


async def test_a_topology_name_that_is_no_dns_name_still_gets_a_working_certificate():
    topo = "a" * 70 + ".x"
    name = tls.server_name(topo)
    assert name.startswith("heron-py.t-") and len(name) < 64
    assert tls.server_name("wc.v2_x-1") == "heron-py.wc.v2_x-1"
    mat = tls.make_topology_tls(topo)
    srv = Server(tls.server_context(mat))
    port = await srv.start()
    try:
        conn = await tls_client(port, mat, topology=topo)
        assert conn.is_open
        conn.close()
    finally:
        srv.close()


async def test_the_secret_handshake_still_guards_a_tls_connection(material):
    srv = Server(tls.server_context(material))
    port = await srv.start()
    try:
        with pytest.raises(HandshakeError, match=r"refused us: authentication failed"):
            await connect("127.0.0.1", port, BaseHandler(), b"wrong", role="client", peer_id="1",
                          log=logging.getLogger("cli"), ssl=tls.client_context(material, TOPO),
                          server_hostname=tls.server_name(TOPO))
        await until(lambda: srv.counters.auth_failures == 1)
        assert srv.opened == []
    finally:
        srv.close()


# --- the material ---

def test_material_round_trips_through_bytes(material):
    raw = material.to_bytes()
    assert tls.TlsMaterial.from_bytes(raw) == material
    assert set(__import__("json").loads(raw)) == {"format", "ca_cert", "cert", "key"}
    with pytest.raises(ValueError, match="format"):
        tls.TlsMaterial.from_bytes(b'{"format": "other"}')
    with pytest.raises(ValueError, match="JSON"):
        tls.TlsMaterial.from_bytes(b"\x00garbage")
    with pytest.raises(ValueError, match="'key'"):
        tls.TlsMaterial.from_bytes(raw.replace(b"PRIVATE KEY", b"NOTHING"))


def test_the_ca_is_a_self_signed_p256_ca_that_can_sign_nothing_below_the_leaf(material):
    ca = x509.load_pem_x509_certificate(material.ca_cert)
    assert ca.issuer == ca.subject
    ca.verify_directly_issued_by(ca)
    assert isinstance(ca.public_key(), ec.EllipticCurvePublicKey) and ca.public_key().curve.name == "secp256r1"
    bc = ca.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and bc.value.ca and bc.value.path_length == 0
    ku = ca.extensions.get_extension_for_class(x509.KeyUsage)
    assert ku.critical and ku.value.key_cert_sign and ku.value.crl_sign and not ku.value.digital_signature
    life = ca.not_valid_after_utc - ca.not_valid_before_utc
    assert datetime.timedelta(days=3650) <= life <= datetime.timedelta(days=3651)
    now = datetime.datetime.now(datetime.UTC)
    assert ca.not_valid_before_utc < now < ca.not_valid_after_utc
    # the CA key is not in the material: only the topology certificate's key is
    assert material.key.count(b"BEGIN PRIVATE KEY") == 1


def test_the_topology_certificate_names_the_topology_for_client_and_server_auth(material, foreign):
    ca = x509.load_pem_x509_certificate(material.ca_cert)
    cert = x509.load_pem_x509_certificate(material.cert)
    assert cert.issuer == ca.subject
    cert.verify_directly_issued_by(ca)
    with pytest.raises(Exception):  # noqa: B017 - InvalidSignature or ValueError, by version
        cert.verify_directly_issued_by(x509.load_pem_x509_certificate(foreign.ca_cert))
    bc = cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert bc.critical and not bc.value.ca
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == ["heron-py.wc"]
    assert san.get_values_for_type(x509.IPAddress) == []  # hosts are not named: containers move
    ku = cert.extensions.get_extension_for_class(x509.KeyUsage)
    assert ku.critical and ku.value.digital_signature and not ku.value.key_cert_sign
    eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert set(eku) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}
    key = load_pem_private_key(material.key, password=None)
    assert key.public_key() == cert.public_key()
    assert cert.not_valid_after_utc <= ca.not_valid_after_utc


def test_contexts_require_the_peers_certificate_and_trust_only_the_topology_ca(material, foreign):
    srv, cli = tls.server_context(material), tls.client_context(material, TOPO)
    for ctx in (srv, cli):
        assert ctx.verify_mode is ssl.CERT_REQUIRED
        assert ctx.minimum_version is ssl.TLSVersion.TLSv1_2
        [ca] = ctx.get_ca_certs()  # no system CAs
        assert ca["subject"] == ((("organizationName", "heron-py"),), (("commonName", "heron-py CA wc"),))
    assert cli.check_hostname
    with pytest.raises(ValueError, match="not for topology 'other'"):
        tls.client_context(material, "other")


def _file_descriptors() -> dict[str, str]:
    """This process's descriptors of files (memfds included) and what they point to. Sockets,
    pipes and event fds are left out: other threads of the test process (py4j's connections to
    a Spark session an earlier test started, event loops) open those at any time."""
    out = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue  # closed meanwhile (the listing's own descriptor)
        if not target.startswith(("socket:", "pipe:", "anon_inode:")):
            out[fd] = target
    return out


def test_key_loading_leaves_no_file_and_no_descriptor(material, tmp_path, monkeypatch):
    fds = _file_descriptors()
    tls.server_context(material)
    assert _file_descriptors().items() <= fds.items()
    # where memfd_create is missing: a private temporary directory, gone after loading
    monkeypatch.delattr(os, "memfd_create")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    seen = []
    real = ssl.SSLContext.load_cert_chain

    def spy(self, certfile, keyfile=None, password=None):
        seen.append((certfile, oct(os.stat(os.path.dirname(certfile)).st_mode & 0o777),
                     oct(os.stat(certfile).st_mode & 0o777), b"BEGIN PRIVATE KEY" in Path(certfile).read_bytes()))
        return real(self, certfile, keyfile, password)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", spy)
    ctx = tls.client_context(material, TOPO)
    [(path, dir_mode, file_mode, clear_key)] = seen
    assert path.startswith(str(tmp_path)) and dir_mode == "0o700" and file_mode == "0o600"
    assert not clear_key  # the key is written encrypted under a one-time password
    assert list(tmp_path.iterdir()) == []
    assert ctx.verify_mode is ssl.CERT_REQUIRED
