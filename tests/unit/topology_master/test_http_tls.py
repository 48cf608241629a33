"""HTTPS for the topology master's HTTP API when the topology's TLS is on (issue 34, item 7):
a real aiohttp server with the topology's certificate, the CLI's request through the state
manager, a plain-HTTP client refused, and a client that trusts another topology's CA refused."""

import asyncio
import ssl
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from heron_py.cli.admin import AdminError, tm_get
from heron_py.common.handshake import http_admin_token, http_read_token
from heron_py.common.tls import PeerTls, TlsMaterial, https_client_context, make_topology_tls
from heron_py.state.base import TManagerLocation
from heron_py.state.localfs import LocalFsStateManager
from tests.fakes import FakeApiMaster
from topology_master.http_api import Api
from topology_master.http_server import HttpServer, serve_http

SECRET = b"s" * 32


@pytest.fixture(scope="module")
def material() -> TlsMaterial:
    return make_topology_tls("t")


@pytest.fixture
async def https_server(material: TlsMaterial) -> AsyncIterator[HttpServer]:
    tls = PeerTls.of(material, "t")
    srv = await serve_http(Api(FakeApiMaster()), "127.0.0.1", token=http_read_token(SECRET),
                           action_token=http_admin_token(SECRET), ssl_context=tls.http)
    yield srv
    await srv.close()


def _state(tmp_path: Path, port: int, material: TlsMaterial | None, scheme: str = "https") -> LocalFsStateManager:
    st = LocalFsStateManager(tmp_path)
    st.set_secret("t", SECRET)
    if material is not None:
        st.set_tls("t", material.to_bytes())
    st.set_tmanager_location("t", TManagerLocation("127.0.0.1", 1, 1, port, "", scheme))
    return st


async def test_the_cli_reads_the_api_over_https_verified_by_the_topologys_ca(material: TlsMaterial,
                                                                              tmp_path: Path) -> None:
    # as the master serves on loopback: reads without a token (the CLI sends none there)
    srv = await serve_http(Api(FakeApiMaster()), "127.0.0.1", action_token=http_admin_token(SECRET),
                           ssl_context=PeerTls.of(material, "t").http)
    try:
        st = _state(tmp_path, srv.port, material)
        result = await asyncio.to_thread(tm_get, st, "t", "/topologies/execution_state")
        assert result["topology"] == "t"
    finally:
        await srv.close()


async def test_plain_http_to_the_https_port_gets_no_answer(https_server: HttpServer) -> None:
    url = f"http://127.0.0.1:{https_server.port}/topologies/execution_state"
    with pytest.raises((urllib.error.URLError, ConnectionError)):
        await asyncio.to_thread(urllib.request.urlopen, url, timeout=5)


async def test_a_client_trusting_another_topologys_ca_is_refused(https_server: HttpServer) -> None:
    other = https_client_context(make_topology_tls("other"))
    url = f"https://127.0.0.1:{https_server.port}/topologies/execution_state"
    with pytest.raises(urllib.error.URLError) as e:
        await asyncio.to_thread(urllib.request.urlopen, url, timeout=5, context=other)
    assert isinstance(e.value.reason, ssl.SSLCertVerificationError)


async def test_the_token_is_still_needed_over_https(https_server: HttpServer, material: TlsMaterial) -> None:
    # HTTPS hides the token on the wire; it does not replace it (the bound address is loopback
    # here, so the JSON API needs the token only because this server was given one)
    url = f"https://127.0.0.1:{https_server.port}/topologies/execution_state"
    with pytest.raises(urllib.error.HTTPError) as e:
        await asyncio.to_thread(urllib.request.urlopen, url, timeout=5, context=https_client_context(material))
    assert e.value.code == 401


async def test_https_location_without_tls_material_is_one_clear_error(https_server: HttpServer,
                                                                      tmp_path: Path) -> None:
    st = _state(tmp_path, https_server.port, None)
    with pytest.raises(AdminError) as e:
        await asyncio.to_thread(tm_get, st, "t", "/topologies/execution_state")
    assert str(e.value) == ("topology master of 't' serves HTTPS, but the state manager holds no TLS material for 't' "
                            "to verify it with")


def test_the_location_keeps_its_scheme_and_old_documents_read_as_http() -> None:
    loc = TManagerLocation("h", 1, 2, 3, "o", "https")
    assert TManagerLocation.from_dict(loc.to_dict()) == loc
    old = {"host": "h", "port": 1, "pid": 2, "http_port": 3, "owner": "o"}
    assert TManagerLocation.from_dict(old).http_scheme == "http"
    assert TManagerLocation.from_dict({**old, "http_scheme": "ftp"}).http_scheme == "http"
