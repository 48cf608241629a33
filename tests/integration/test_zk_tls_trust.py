"""Over TLS, heron-py's ZooKeeper client (kazoo's connections, not only the context heron-py
checks files with) trusts only the CA in --zk-ca-file: a real ZooKeeper whose certificate
another CA signed is refused even when the machine's trust store holds that CA, with the host
name checked or not. Without --zk-ca-file the machine's store is used, as documented.

The machine's trust store is OpenSSL's default paths, which SSL_CERT_FILE and SSL_CERT_DIR
replace here; the server's CA in it plays a public CA that signs certificates for anyone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from heron_py.state import StateManagerError
from heron_py.state.config import StateConfig
from heron_py.state.zookeeper import ZkStateManager
from tests.zkserver import Pki, ZkServer, make_pki, missing_tls_tools

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tls_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZkServer]:
    why = missing_tls_tools()
    if why:
        pytest.skip(why)
    base = tmp_path_factory.mktemp("zk-tls-trust")
    server = ZkServer(base / "server", tls=make_pki(base / "pki", server_names=("localhost",)))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def store_trusts_the_server(tls_zk: ZkServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Pki:
    assert tls_zk.tls is not None
    (tmp_path / "no-certs").mkdir()
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_zk.tls.ca))
    monkeypatch.setenv("SSL_CERT_DIR", str(tmp_path / "no-certs"))
    return tls_zk.tls


def _cfg(server: ZkServer, tmp_path: Path, ca: Path | None, verify_hostname: bool, root: str) -> StateConfig:
    pki = server.tls
    assert pki is not None
    return StateConfig(kind="zookeeper", zk_hosts=f"localhost:{server.port}", zk_root=root,
                       zk_auth_file=str(tmp_path / "zk.auth"), zk_tls=True, zk_ca_file=str(ca) if ca else "",
                       zk_cert_file=str(pki.client_cert), zk_key_file=str(pki.client_key),
                       zk_tls_verify_hostname=verify_hostname, connect_timeout_s=2.0)


@pytest.mark.parametrize("verify_hostname", [False, True])
def test_a_server_certificate_another_ca_signed_is_refused(tls_zk: ZkServer, tmp_path: Path,
                                                            store_trusts_the_server: Pki,
                                                            verify_hostname: bool) -> None:
    other = store_trusts_the_server.other_ca
    with pytest.raises(StateManagerError) as e:
        ZkStateManager(_cfg(tls_zk, tmp_path, other, verify_hostname, root=f"/t-trust-{verify_hostname}")).close()
    hosts = f"localhost:{tls_zk.port}"
    naming = " naming the host in --zk" if verify_hostname else ""
    assert str(e.value) == (
        f"ZooKeeper at {hosts}: TLS handshake failed: {hosts}: certificate verify failed: unable to get local "
        f"issuer certificate (expected a server certificate signed by a CA in {other}{naming}); state manager "
        f"zookeeper at {hosts}/t-trust-{verify_hostname} over TLS")


def test_the_configured_ca_and_by_default_the_machine_store(tls_zk: ZkServer, tmp_path: Path,
                                                           store_trusts_the_server: Pki,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    ZkStateManager(_cfg(tls_zk, tmp_path, None, True, "/t-trust-ok")).close()
    # the store now holds only a CA that signed nothing here: the configured CA alone verifies
    monkeypatch.setenv("SSL_CERT_FILE", str(store_trusts_the_server.other_ca))
    st = ZkStateManager(_cfg(tls_zk, tmp_path, store_trusts_the_server.ca, True, "/t-trust-ok"))
    try:
        st.set_secret("wc", b"s3cret")
        assert st.get_secret("wc") == b"s3cret"
    finally:
        st.close()
