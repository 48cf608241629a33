"""The HTTP endpoints' connection cap is shared fairly between sources, as the framed ports'
is (guard.py): idle connections do not lock out API requests; and every answer, the 421 and
the parser's 400 included, forbids framing. Real aiohttp servers on loopback, raw sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from heron_py.common import http_guard
from heron_py.common.http_guard import SECURITY_HEADERS
from tests.fakes import FakeApiMaster
from tests.unit.topology_master.test_http_api import _exchange
from topology_master.http_api import Api
from topology_master.http_server import HttpServer, serve_http

GET = b"GET /topologies HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"


@pytest.fixture
async def server() -> AsyncIterator[HttpServer]:
    srv = await serve_http(Api(FakeApiMaster()), "127.0.0.1", head_timeout=30.0, action_token="a" * 64)
    yield srv
    await srv.close()


async def _idle(port: int, source: str = "127.0.0.1") -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection that sends nothing, from ``source`` (any 127/8 address is this host)."""
    return await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))


async def _closed(reader: asyncio.StreamReader) -> bool:
    """Whether the server closed this idle connection (it never answers one)."""
    try:
        return await asyncio.wait_for(reader.read(), 0.5) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


async def test_idle_connections_past_the_cap_do_not_lock_out_requests(server: HttpServer) -> None:
    # more idle connections than the cap (256), from the same address as the requests
    flood = [await _idle(server.port) for _ in range(300)]
    await asyncio.sleep(0.2)
    answers = [await _exchange(server.port, GET) for _ in range(3)]
    assert [a[0] for a in answers] == ["HTTP/1.1 200 OK"] * 3
    closed = await asyncio.gather(*(_closed(r) for r, _ in flood))
    # the oldest made room, the newest stay: at most the cap (256) are open
    assert closed[:44] == [True] * 44 and closed[-200:] == [False] * 200
    for _, w in flood:
        w.close()


async def test_the_source_holding_the_most_gives_up_its_oldest(server: HttpServer,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_guard.CappedServer, "limit", 5)
    flood = [await _idle(server.port, "127.0.0.2") for _ in range(4)]
    other = await _idle(server.port, "127.0.0.3")
    await asyncio.sleep(0.1)
    late = await _idle(server.port, "127.0.0.2")  # the 6th: 127.0.0.2 holds 5 of them
    await asyncio.sleep(0.1)
    assert await _closed(flood[0][0])  # its own oldest went
    assert not await _closed(other[0]) and not await _closed(late[0])
    newcomer = await _idle(server.port, "127.0.0.3")  # 127.0.0.2 still holds the most
    await asyncio.sleep(0.1)
    assert await _closed(flood[1][0])
    assert not await _closed(other[0]) and not await _closed(newcomer[0])
    other[1].write(GET)  # the other source's old connection is served
    line = await asyncio.wait_for(other[0].readline(), 5)
    assert line == b"HTTP/1.1 200 OK\r\n"
    for _, w in [*flood, other, late, newcomer]:
        w.close()


def _framing_forbidden(headers: dict[str, str]) -> bool:
    return all(headers.get(k.lower()) == v for k, v in SECURITY_HEADERS.items())


@pytest.mark.parametrize(("raw", "status"), [
    (b"GET /topologies HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n",
     "HTTP/1.1 421 Misdirected Request"),
    (b"GARBAGE\r\n\r\n", "HTTP/1.1 400 Bad Request"),
    (b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n", "HTTP/1.1 431 Request Header Fields Too Large"),
    (b"POST /topologies/actions/kill HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
     "HTTP/1.1 401 Unauthorized"),
    (b"PUT /topologies HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
     "HTTP/1.1 405 Method Not Allowed"),
    (b"GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", "HTTP/1.1 404 Not Found"),
], ids=["421", "400", "431", "401", "405", "404"])
async def test_every_answer_of_the_master_forbids_framing(server: HttpServer, raw: bytes, status: str) -> None:
    got, headers, _, _ = await _exchange(server.port, raw)
    assert got == status
    assert _framing_forbidden(headers), headers


@pytest.mark.parametrize(("raw", "status"), [
    (b"GET /metrics HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n", "421 Misdirected Request"),
    (b"GARBAGE\r\n\r\n", "400 Bad Request"),
    (b"GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", "404 Not Found"),
    (b"POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
     "405 Method Not Allowed"),
], ids=["421", "400", "404", "405"])
async def test_every_answer_of_a_metrics_endpoint_forbids_framing(raw: bytes, status: str) -> None:
    from metrics_manager.http import serve_metrics

    srv = await serve_metrics(CollectorRegistry(), "127.0.0.1", 0, None)
    try:
        got, headers, _, _ = await _exchange(srv.port, raw)
        assert got.split(" ", 1)[1] == status  # aiohttp's own 400 says HTTP/1.0
        assert _framing_forbidden(headers), headers
    finally:
        await srv.close()


def test_the_rebinding_answer_is_verbatim() -> None:
    resp = http_guard.misdirected("attacker.example:8888")
    assert resp.text == ("Host 'attacker.example:8888' is not this server's (DNS rebinding?); expected an IP "
                         "address, localhost or this machine's name")
