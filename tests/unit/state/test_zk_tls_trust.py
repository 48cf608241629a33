"""The ZooKeeper TLS context trusts only the CA in --zk-ca-file when one is given, never the
machine's trust store beside it (with the host-name check off, any certificate a public CA
signed would otherwise pass for the ensemble); without --zk-ca-file it is the machine's store.

OpenSSL's default paths are the machine's trust store; SSL_CERT_FILE and SSL_CERT_DIR replace
them here, as a store holding the other CA."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest

from heron_py.state.config import StateConfig
from heron_py.state.zookeeper import tls_context
from tests.zkserver import Pki, make_pki


@pytest.fixture
def pki(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Pki:
    pki = make_pki(tmp_path / "pki")
    # the machine's trust store holds the CA that signed the server's certificate
    (tmp_path / "no-certs").mkdir()
    monkeypatch.setenv("SSL_CERT_FILE", str(pki.ca))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "no-certs"))
    return pki


def _cfg(ca: Path | None, verify_hostname: bool) -> StateConfig:
    return StateConfig(kind="zookeeper", zk_hosts="127.0.0.1:1", zk_root="/r", zk_tls=True,
                       zk_ca_file=str(ca) if ca else "", zk_tls_verify_hostname=verify_hostname)


def _handshake(ctx: ssl.SSLContext, pki: Pki) -> None:
    """A TLS handshake of ``ctx`` with a server whose certificate pki's CA signed."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(str(pki.server_pem))
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True) as tls:
                    tls.recv(1)
            except (ssl.SSLError, OSError):
                pass  # the client refused us
            finally:
                conn.close()

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            with socket.create_connection(listener.getsockname(), timeout=5) as raw, \
                    ctx.wrap_socket(raw, server_hostname="127.0.0.1"):
                pass
        finally:
            t.join(5)


@pytest.mark.parametrize("verify_hostname", [False, True])
def test_only_the_configured_ca_is_trusted(pki: Pki, verify_hostname: bool) -> None:
    ctx = tls_context(_cfg(pki.other_ca, verify_hostname))
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "another CA"),),)]
    with pytest.raises(ssl.SSLCertVerificationError) as e:
        _handshake(ctx, pki)
    assert e.value.verify_message == "unable to get local issuer certificate"


def test_the_configured_ca_alone_verifies_the_server(pki: Pki, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(pki.other_ca))  # the store: a CA that signed nothing here
    _handshake(tls_context(_cfg(pki.ca, True)), pki)


def test_without_a_ca_file_the_machine_store_is_used(pki: Pki) -> None:
    _handshake(tls_context(_cfg(None, True)), pki)

