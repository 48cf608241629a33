"""The server proves its role and its id in the handshake (heron_py/common/handshake.py): a
client that expects another server of the topology (an old address now answered by another
container's stream manager) refuses it before its hello goes, a relay that changes what the
server named fails the server's proof, and the daemons' clients say whom they expect."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest

from heron_py.common.frameauth import session_keys
from heron_py.common.framing import FrameDecoder, MsgType, encode_frame
from heron_py.common.handshake import ClientHandshake, HandshakeError, HandshakeState, PeerIdentity, ServerHandshake
from heron_py.common.net import BaseHandler, Counters, connect, serve
from heron_py.planner.model import StmgrLocation
from proto import heron_py_pb2 as pb
from stream_manager import clique as clique_mod
from stream_manager.clique import Clique

SECRET = b"s" * 32
LOG = logging.getLogger("test.server_identity")


def _one(frame: bytes) -> tuple[int, bytes]:
    [(t, f)] = FrameDecoder("x").feed(frame)
    return t, f


def _nonces():  # type: ignore[no-untyped-def]
    counter = itertools.count()
    return lambda n: bytes([next(counter) % 256]) * n


def test_a_client_refuses_a_server_that_is_not_the_one_it_expects() -> None:
    s = ServerHandshake(SECRET, "stmgr", "client", nonce=_nonces(), server_id="3")
    c = ClientHandshake(SECRET, "stmgr", "1", "10.0.0.7:4000", expect=PeerIdentity("stmgr", "2"))
    with pytest.raises(HandshakeError) as e:
        c.on_frame(*_one(s.start()))
    assert str(e.value) == ("server 10.0.0.7:4000 is stmgr '3', expected stmgr '2' (a stale address, now another "
                            "daemon's of the topology?)")
    assert c.state is HandshakeState.FAILED
    master = ServerHandshake(SECRET, "tmanager", "client")
    c = ClientHandshake(SECRET, "instance", "4", "10.0.0.7:4001", expect=PeerIdentity("stmgr", "2"))
    with pytest.raises(HandshakeError, match=r"^server 10.0.0.7:4001 is tmanager '', expected stmgr '2' "):
        c.on_frame(*_one(master.start()))


def test_the_expected_server_is_proven_by_its_auth() -> None:
    s = ServerHandshake(SECRET, "stmgr", "client", nonce=_nonces(), server_id="2")
    c = ClientHandshake(SECRET, "stmgr", "1", "server", expect=PeerIdentity("stmgr", "2"))
    auth = s.on_frame(*_one(c.on_frame(*_one(s.start()))))  # type: ignore[arg-type]
    assert c.on_frame(*_one(auth)) is None
    assert c.state is HandshakeState.AUTHENTICATED and c.server_identity == PeerIdentity("stmgr", "2")
    assert c.keys is not None and s.keys is not None and c.keys.send == s.keys.recv


def test_a_relay_that_renames_the_server_fails_its_proof() -> None:
    s = ServerHandshake(SECRET, "stmgr", "client", nonce=_nonces(), server_id="3")
    _, frame = _one(s.start())
    hello = pb.ServerHello.FromString(frame[6:])
    hello.server_id = "2"  # what the client expects
    c = ClientHandshake(SECRET, "stmgr", "1", "server", expect=PeerIdentity("stmgr", "2"))
    reply = c.on_frame(*_one(encode_frame(MsgType.SERVER_HELLO, hello.SerializeToString())))
    auth = s.on_frame(*_one(reply))  # type: ignore[arg-type]
    with pytest.raises(HandshakeError) as e:
        c.on_frame(*_one(auth))
    assert str(e.value) == "server server failed authentication: wrong topology secret"


def test_the_session_keys_are_bound_to_the_servers_id() -> None:
    n1, n2 = b"a" * 32, b"b" * 32
    assert session_keys(SECRET, n1, n2, "stmgr", "1", "stmgr", "2") != session_keys(SECRET, n1, n2, "stmgr", "1",
                                                                                     "stmgr", "3")


async def test_connect_refuses_another_stream_manager_of_the_topology() -> None:
    counters = Counters()
    server = await serve("127.0.0.1", 0, BaseHandler, SECRET, role="stmgr", log=LOG, counters=Counters(),
                         server_id="3")
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(HandshakeError) as e:
            await connect("127.0.0.1", port, BaseHandler(), SECRET, role="stmgr", peer_id="1", log=LOG,
                          counters=counters, expect=PeerIdentity("stmgr", "2"))
        assert str(e.value) == (f"server 127.0.0.1:{port} is stmgr '3', expected stmgr '2' (a stale address, now "
                                f"another daemon's of the topology?)")
        assert counters.auth_failures == 1
        conn = await connect("127.0.0.1", port, BaseHandler(), SECRET, role="stmgr", peer_id="1", log=LOG,
                             expect=PeerIdentity("stmgr", "3"))
        assert conn.is_open and conn.peer_role == "stmgr"
        conn.close()
    finally:
        server.close()


async def test_the_clique_connects_only_to_the_stream_manager_of_the_peers_container(monkeypatch, caplog) -> None:
    """The plan says container 1 is at this port, but container 5's stream manager answers there
    (it took the port of container 1's old one): the clique refuses it and keeps retrying."""
    monkeypatch.setattr(clique_mod, "RETRY_S", 0.01)
    server = await serve("127.0.0.1", 0, BaseHandler, SECRET, role="stmgr", log=LOG, counters=Counters(),
                         server_id="5")
    port = server.sockets[0].getsockname()[1]
    connected: list[int] = []
    tasks: list[asyncio.Task[None]] = []
    c = Clique(container=0, secret=SECRET, log=logging.getLogger("clique"), max_frame=1 << 20,
               handler=lambda k: BaseHandler(), on_connected=lambda k, cn: connected.append(k),
               spawn=lambda coro: tasks.append(asyncio.ensure_future(coro)), backpressure_cause=lambda: None)
    c._locations = {1: StmgrLocation(1, "127.0.0.1", port, 1)}
    try:
        with caplog.at_level(logging.INFO, "clique"):
            c.ensure(1)
            await asyncio.sleep(0.3)
        assert connected == []
        assert (f"stream manager 1 at 127.0.0.1:{port} not reachable (HandshakeError: server 127.0.0.1:{port} is "
                f"stmgr '5', expected stmgr '1' (a stale address, now another daemon's of the topology?))"
                in caplog.text)
    finally:
        c._locations = {}
        for t in tasks:
            await asyncio.wait_for(t, 5)
        server.close()


async def test_a_daemon_reaches_the_master_only() -> None:
    """A stale master location whose port a stream manager of the topology took since: refused."""
    from heron_py.links.tmlink import connect_master
    from heron_py.state import TManagerLocation

    server = await serve("127.0.0.1", 0, BaseHandler, SECRET, role="stmgr", log=LOG, counters=Counters(),
                         server_id="0")
    port = server.sockets[0].getsockname()[1]

    class Follow:
        current = TManagerLocation("127.0.0.1", port, 1)

    try:
        with pytest.raises(HandshakeError) as e:
            await connect_master(Follow(), BaseHandler(), SECRET, role="metricsmgr", peer_id="0",  # type: ignore[arg-type]
                                 log=LOG, max_frame=1 << 20, tls=None)
        assert str(e.value) == (f"server 127.0.0.1:{port} is stmgr '0', expected tmanager '' (a stale address, now "
                                f"another daemon's of the topology?)")
    finally:
        server.close()


async def test_an_instance_reaches_only_the_managers_of_its_container(tmp_path) -> None:
    import json
    import queue

    from instance.gateway import Gateway, GatewayConfig, task_metrics_link
    from instance.queues import InItem, OutQueue, QueueBytes

    stmgr = await serve("127.0.0.1", 0, BaseHandler, SECRET, role="stmgr", log=LOG, counters=Counters(),
                        server_id="3")
    metricsmgr = await serve("127.0.0.1", 0, BaseHandler, SECRET, role="metricsmgr", log=LOG, counters=Counters(),
                             server_id="3")
    sm_port, mm_port = stmgr.sockets[0].getsockname()[1], metricsmgr.sockets[0].getsockname()[1]
    (tmp_path / "stmgr.port").write_text(str(sm_port))
    (tmp_path / "metricsmgr.json").write_text(json.dumps({"port": mm_port}))
    cfg = GatewayConfig(task_id=7, component="count", secret=SECRET, sm_port_file=tmp_path / "stmgr.port",
                        max_frame=1 << 20, unix_socket=False, container=2)
    gw = Gateway(cfg, inbound=queue.Queue[InItem](), outbound=OutQueue(8, 1 << 20), in_bytes=QueueBytes(1 << 20),
                 out_bytes=QueueBytes(1 << 20), log=LOG)
    link = task_metrics_link(cfg, dict, 60.0, tmp_path / "metricsmgr.json", LOG)
    try:
        with pytest.raises(HandshakeError, match=rf"^server 127.0.0.1:{sm_port} is stmgr '3', expected stmgr '2' "):
            await gw._connect()
        with pytest.raises(HandshakeError, match=rf"^server 127.0.0.1:{mm_port} is metricsmgr '3', expected "
                                                 rf"metricsmgr '2' "):
            await link._connect()
    finally:
        stmgr.close()
        metricsmgr.close()
