"""The master's HTTP API on two tokens: the read token reads, the admin token acts (and reads);
a task's log, which carries tuple data, needs a token from any user but the master's own, on
loopback too. Real aiohttp servers; the other user is a real process of uid 65534 (nobody)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from heron_py.common.handshake import http_admin_token, http_read_token, scrape_token
from heron_py.common.http_guard import same_uid_peer, tcp_peer_uid
from tests.unit.topology_master.test_ui_api import Master, api, master  # noqa: F401 (fixtures)
from topology_master.http_api import Api
from topology_master.http_server import HttpServer, serve_http

SECRET = b"k" * 32
READ, ADMIN = http_read_token(SECRET), http_admin_token(SECRET)
NOBODY = 65534
LOG = "/topologies/logs?task=2&length=10"
LOG_REFUSED = ("a task's log needs the header 'Authorization: Bearer TOKEN' with the topology's read or admin token "
               "from anyone but the topology's own user on this host (heron-py status prints the page's address "
               "with them), found {found}")
ACTION_REFUSED = ("an action needs the header 'Authorization: Bearer TOKEN' with the topology's admin token, on "
                  "loopback too (heron-py status prints the page's address with it), found {found}")
READ_REFUSED = ("this HTTP API is not on loopback: expected the header 'Authorization: Bearer TOKEN' with the "
                "topology's read or admin token (heron-py status prints the page's address with them), found {found}")


def test_the_three_tokens_are_derived_apart() -> None:
    assert len({READ, ADMIN, scrape_token(SECRET)}) == 3
    assert http_read_token(b"j" * 32) != READ and http_admin_token(b"j" * 32) != ADMIN


@pytest.fixture
async def off_loopback(api: Api) -> AsyncIterator[HttpServer]:  # noqa: F811
    # as the master serves off loopback: every read wants a token (bound here on 127.0.0.1)
    srv = await serve_http(api, "127.0.0.1", token=READ, action_token=ADMIN, log_token=READ)
    yield srv
    await srv.close()


async def test_the_read_token_reads_and_cannot_act(off_loopback: HttpServer, master: Master) -> None:  # noqa: F811
    base = f"http://127.0.0.1:{off_loopback.port}"
    async with aiohttp.ClientSession() as s:
        async with s.get(f"{base}/topologies/execution_state") as r:
            assert (r.status, await r.text()) == (401, READ_REFUSED.format(found="no Authorization header"))
        for token in (READ, ADMIN):
            async with s.get(f"{base}/topologies/execution_state", headers={"Authorization": f"Bearer {token}"}) as r:
                assert r.status == 200 and (await r.json())["result"]["state"] == "RUNNING"
        async with s.post(f"{base}/topologies/actions/kill", headers={"Authorization": f"Bearer {READ}"}) as r:
            assert (r.status, await r.text()) == (401, ACTION_REFUSED.format(found="a wrong token"))
        assert master.cli_calls == []
        async with s.post(f"{base}/topologies/actions/deactivate", headers={"Authorization": f"Bearer {ADMIN}"}) as r:
            assert r.status == 200 and (await r.json())["result"]["message"] == "topology 't' is now PAUSED"


@pytest.fixture
async def on_loopback(api: Api) -> AsyncIterator[HttpServer]:  # noqa: F811
    # as the master serves on loopback: reads open, logs and actions not
    srv = await serve_http(api, "127.0.0.1", action_token=ADMIN, log_token=READ)
    yield srv
    await srv.close()


def _as_nobody(url: str, token: str | None = None) -> tuple[int, str]:
    """A GET by a process of uid 65534 (the system's Python: the test's may not be readable)."""
    code = ("import sys, urllib.request, urllib.error\n"
            "req = urllib.request.Request(sys.argv[1])\n"
            "if len(sys.argv) > 2: req.add_header('Authorization', 'Bearer ' + sys.argv[2])\n"
            "try:\n"
            "    r = urllib.request.urlopen(req, timeout=10); print(r.status); print(r.read().decode(), end='')\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code); print(e.read().decode(), end='')\n")
    p = subprocess.run(["/usr/bin/python3", "-c", code, url, *([token] if token else [])], capture_output=True,
                       text=True, timeout=30, user=NOBODY, group=NOBODY, cwd="/", env={"PATH": "/usr/bin:/bin"})
    assert p.returncode == 0, p.stderr
    status, _, body = p.stdout.partition("\n")
    return int(status), body


@pytest.mark.skipif(os.geteuid() != 0, reason="starting a process of another user needs root")
async def test_a_log_read_needs_a_token_from_another_user_on_loopback_too(on_loopback: HttpServer) -> None:
    import asyncio

    url = f"http://127.0.0.1:{on_loopback.port}{LOG}"
    assert await asyncio.to_thread(_as_nobody, url) == (401, LOG_REFUSED.format(found="no Authorization header"))
    assert await asyncio.to_thread(_as_nobody, url, ADMIN[::-1]) == (401, LOG_REFUSED.format(found="a wrong token"))
    for token in (READ, ADMIN):
        status, body = await asyncio.to_thread(_as_nobody, url, token)
        assert (status, json.loads(body)["result"]["data"]) == (200, "line 0999\n")
    # the rest of the page stays open to the host, as before
    status, body = await asyncio.to_thread(_as_nobody, f"http://127.0.0.1:{on_loopback.port}/topologies/tasks")
    assert status == 200 and json.loads(body)["status"] == "success"
    # and the master's own user reads its logs without one
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        assert r.status == 200 and (await r.json())["result"]["data"] == "line 0999\n"


async def test_the_peer_uid_of_a_loopback_connection_is_the_kernels() -> None:
    import asyncio

    seen: list[tuple[int | None, bool]] = []

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer, local = writer.get_extra_info("peername"), writer.get_extra_info("sockname")
        seen.append((tcp_peer_uid(peer, local), same_uid_peer(writer.transport)))
        writer.close()

    for host, family in (("127.0.0.1", socket.AF_INET), ("::1", socket.AF_INET6)):
        srv = await asyncio.start_server(on_client, host, 0, family=family)
        reader, writer = await asyncio.open_connection(host, srv.sockets[0].getsockname()[1])
        await reader.read()
        writer.close()
        srv.close()
    assert seen == [(os.geteuid(), True), (os.geteuid(), True)]


def test_the_peer_uid_is_read_from_the_peers_own_socket(tmp_path: Path) -> None:
    # /proc/net/tcp as the kernel writes it: the server's socket (uid 0) and the peer's (1000)
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 1\n"
        "   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 2\n")
    tables = {socket.AF_INET: table}
    if sys.byteorder == "little":
        assert tcp_peer_uid(("127.0.0.1", 50000), ("127.0.0.1", 8080), tables) == 1000
        assert tcp_peer_uid(("127.0.0.1", 8080), ("127.0.0.1", 50000), tables) == 0
    assert tcp_peer_uid(("127.0.0.1", 50001), ("127.0.0.1", 8080), tables) is None  # not on this host
