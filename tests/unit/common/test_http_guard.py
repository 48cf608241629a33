"""The HTTP endpoints' guard (issue 34, item 7 and part of 5): the Host header against DNS
rebinding, no framing by other sites; and Prometheus scrapes on a
token of their own, apart from the one that allows actions."""

from __future__ import annotations

import pytest

from heron_py.common.handshake import http_admin_token, http_read_token, scrape_token
from heron_py.common.http_guard import host_allowed
from tests.fakes import FakeApiMaster
from tests.unit.topology_master.test_http_api import _exchange
from topology_master.http_api import Api
from topology_master.http_server import serve_http


def test_host_names_this_server_or_is_refused() -> None:
    for ok in ("127.0.0.1", "127.0.0.1:8888", "[::1]:80", "10.1.2.3", "localhost:9", "LOCALHOST", None, ""):
        assert host_allowed(ok, "127.0.0.1"), ok
    assert host_allowed("node7.cluster:80", "node7.cluster")
    for bad in ("attacker.example", "attacker.example:8888", "localhost.attacker.example", "127.0.0.1.nip.io"):
        assert not host_allowed(bad, "127.0.0.1"), bad


def test_scrape_and_action_tokens_differ() -> None:
    assert len({scrape_token(b"s"), http_read_token(b"s"), http_admin_token(b"s")}) == 3
    assert scrape_token(b"s") == scrape_token(b"s") != scrape_token(b"t")


@pytest.fixture
async def server():
    srv = await serve_http(Api(FakeApiMaster()), "127.0.0.1", head_timeout=2.0)
    yield srv
    await srv.close()


async def test_a_rebound_host_gets_421_and_every_answer_forbids_framing(server) -> None:
    status, headers, body, _ = await _exchange(
        server.port, b"GET /topologies HTTP/1.1\r\nHost: attacker.example:8888\r\nConnection: close\r\n\r\n")
    assert status == "HTTP/1.1 421 Misdirected Request"
    assert body.decode() == ("Host 'attacker.example:8888' is not this server's (DNS rebinding?); expected an IP "
                             "address, localhost or this machine's name")
    status, headers, _, _ = await _exchange(
        server.port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert status == "HTTP/1.1 200 OK"
    assert headers["x-frame-options"] == "DENY"
    assert headers["content-security-policy"] == "frame-ancestors 'none'"
