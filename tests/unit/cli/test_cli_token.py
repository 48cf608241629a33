"""Where the CLI sends the topology's token (heron_py/cli/admin.py ``tm_get``): nowhere on
loopback (a local user who binds the port a stale location names gets nothing); off loopback
only the read token, only over HTTPS to a server whose certificate the topology's CA signed;
never over plain HTTP off loopback. And the location a killed master leaves is removed by its
executor. Real sockets: loopback, and this host's non-loopback address for "off loopback"."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import ssl
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from heron_py.cli.admin import AdminError, tm_get
from heron_py.common.handshake import http_admin_token, http_read_token
from heron_py.common.tls import PeerTls, TlsMaterial, make_topology_tls
from heron_py.state.base import TManagerLocation
from heron_py.state.localfs import LocalFsStateManager
from tests.fakes import FakeApiMaster
from topology_master.http_api import Api
from topology_master.http_server import serve_http

SECRET = b"s" * 32


def _own_address() -> str:
    """This host's address off loopback (the test runs where it has one)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this picks the outgoing interface
            addr = str(s.getsockname()[0])
    except OSError:
        addr = "127.0.0.1"  # no route off this host
    if addr.startswith("127."):
        pytest.skip("this host has no address off loopback")
    return addr


class Squatter:
    """A local process's server at a port a stale location names: it answers like the master
    and keeps every request head it gets (or, with ``tls``, presents that certificate)."""

    def __init__(self) -> None:
        self.heads: list[bytes] = []
        self.connections = 0
        self.server: asyncio.Server | None = None

    async def start(self, host: str, tls: ssl.SSLContext | None = None) -> int:
        async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.connections += 1
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
                writer.close()
                return
            self.heads.append(head)
            body = json.dumps({"status": "success", "result": {"topology": "t", "state": "FAKE"}}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                         b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            writer.close()

        self.server = await asyncio.start_server(on_client, host, 0, ssl=tls)
        return int(self.server.sockets[0].getsockname()[1])

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


@pytest.fixture
async def squatter() -> AsyncIterator[Squatter]:
    s = Squatter()
    yield s
    s.close()


def _state(tmp_path: Path, host: str, port: int, scheme: str, material: TlsMaterial | None = None
           ) -> LocalFsStateManager:
    st = LocalFsStateManager(tmp_path)
    st.set_secret("t", SECRET)
    if material is not None:
        st.set_tls("t", material.to_bytes())
    # a location whose holder is on another host: the store cannot tell it is stale
    st.set_tmanager_location("t", TManagerLocation(host, 1, 1, port, "elsewhere:1", scheme))
    return st


async def test_on_loopback_the_cli_sends_no_token(squatter: Squatter, tmp_path: Path) -> None:
    st = _state(tmp_path, "127.0.0.1", await squatter.start("127.0.0.1"), "http")
    result = await asyncio.to_thread(tm_get, st, "t", "/topologies/execution_state")
    assert result["state"] == "FAKE"  # it reached the squatter, which learned nothing
    assert len(squatter.heads) == 1 and b"authorization" not in squatter.heads[0].lower()
    for token in (http_read_token(SECRET), http_admin_token(SECRET)):
        assert token.encode() not in squatter.heads[0]


async def test_off_loopback_plain_http_gets_no_request_at_all(squatter: Squatter, tmp_path: Path) -> None:
    host = _own_address()
    port = await squatter.start(host)
    st = _state(tmp_path, host, port, "http")
    with pytest.raises(AdminError) as e:
        await asyncio.to_thread(tm_get, st, "t", "/topologies/execution_state")
    assert str(e.value) == (
        f"topology master of 't' at {host}:{port} serves plain HTTP off loopback; expected HTTPS under the "
        f"topology's certificate (heron.network.tls.enabled, on by default off loopback), found http: the CLI "
        f"does not send the topology's token in clear")
    assert squatter.connections == 0


async def test_off_loopback_a_server_without_the_topologys_certificate_gets_no_token(
        squatter: Squatter, tmp_path: Path) -> None:
    host = _own_address()
    other = PeerTls.of(make_topology_tls("t"), "t")  # the same name, another CA
    port = await squatter.start(host, other.http)
    st = _state(tmp_path, host, port, "https", make_topology_tls("t"))
    with pytest.raises(AdminError) as e:
        await asyncio.to_thread(tm_get, st, "t", "/topologies/execution_state")
    assert str(e.value).startswith(f"topology master of 't' at {host}:{port} is not reachable: ")
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value)
    assert squatter.heads == []


async def test_off_loopback_the_master_gets_the_read_token_over_https(tmp_path: Path) -> None:
    host = _own_address()
    material = make_topology_tls("t")
    # the master off loopback; a request with the admin token alone would be refused here
    srv = await serve_http(Api(FakeApiMaster()), host, token=http_read_token(SECRET),
                           ssl_context=PeerTls.of(material, "t").http)
    try:
        st = _state(tmp_path, host, srv.port, "https", material)
        result = await asyncio.to_thread(tm_get, st, "t", "/topologies/execution_state")
        assert result["topology"] == "t"
    finally:
        await srv.close()


def test_a_location_whose_local_holder_died_is_no_location(tmp_path: Path) -> None:
    import subprocess

    st = LocalFsStateManager(tmp_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    st.set_tmanager_location("t", TManagerLocation("127.0.0.1", 1, dead.pid, 2, f"{socket.gethostname()}:{dead.pid}"))
    assert st.get_tmanager_location("t") is None
    st.set_tmanager_location("t", TManagerLocation("127.0.0.1", 1, os.getpid(), 2,
                                                   f"{socket.gethostname()}:{os.getpid()}"))
    assert st.get_tmanager_location("t") is not None


def test_the_executor_removes_the_location_of_a_master_killed_without_releasing_it(tmp_path: Path) -> None:
    from heron_py.scheduler.executor import Child, Executor
    from heron_py.state import StateConfig

    home = tmp_path / "home"
    ex = Executor(topology="t", container=0, home=home, log=__import__("logging").getLogger("test.executor"),
                  state_config=StateConfig())
    ex.package_dir = tmp_path
    ex.paths.private(ex.paths.container_logs(0))
    ex.paths.private(ex.paths.container(0))
    path = home / "state" / "tmanagers" / "t"
    # a master that claims the location, then dies by SIGKILL: nothing of its own removes it
    script = ("import json, os, signal, socket, sys\n"
              "loc = {'host': '127.0.0.1', 'port': 1, 'pid': os.getpid(), 'http_port': 2,\n"
              "       'owner': f'{socket.gethostname()}:{os.getpid()}', 'http_scheme': 'http'}\n"
              "open(sys.argv[1], 'w').write(json.dumps(loc))\n"
              "os.kill(os.getpid(), signal.SIGKILL)\n")
    path.parent.mkdir(parents=True)
    child = Child("tmanager", [sys.executable, "-c", script, str(path)], ex.paths.container_logs(0) / "tmanager.log")
    ex.children = [child]
    ex._spawn(child)
    assert child.proc is not None
    child.proc.wait()
    pid = child.proc.pid
    assert json.loads(path.read_text())["pid"] == pid and child.proc.returncode == -signal.SIGKILL
    ex.supervise_once()
    deadline = time.monotonic() + 5
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not path.exists()
    # another master's location (a standby that claimed it meanwhile) is kept
    other = TManagerLocation("127.0.0.1", 1, os.getpid(), 2, f"{socket.gethostname()}:{os.getpid()}")
    ex.state.set_tmanager_location("t", other)
    assert ex.state.forget_tmanager("t", "127.0.0.1", pid) is False
    assert ex.state.get_tmanager_location("t") == other
    ex.state.close()
