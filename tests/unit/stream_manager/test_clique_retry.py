"""The clique keeps retrying a peer whose handshake fails (issue 34, item 3): a HandshakeError
(an old port answered by another daemon, a peer mid-restart) is one more failed attempt, not
the end of the connect task."""

from __future__ import annotations

import asyncio
import logging

from heron_py.common.handshake import HandshakeError
from heron_py.common.net import BaseHandler
from heron_py.planner.model import StmgrLocation
from stream_manager import clique as clique_mod
from stream_manager.clique import Clique
from tests.fakes import FakeConn


async def test_a_handshake_error_is_retried_with_backoff(monkeypatch, caplog) -> None:
    monkeypatch.setattr(clique_mod, "RETRY_S", 0.01)
    attempts: list[tuple[str, int]] = []
    conn = FakeConn()

    async def fake_connect(host, port, handler, secret, **kw):
        attempts.append((host, port))
        if len(attempts) == 1:
            raise HandshakeError("server 127.0.0.1:4000 failed authentication: wrong topology secret")
        if len(attempts) == 2:
            raise ConnectionRefusedError("refused")
        return conn

    connected: list[int] = []
    tasks: list[asyncio.Task[None]] = []
    c = Clique(container=0, secret=b"s", log=logging.getLogger("clique"), max_frame=1 << 20,
               handler=lambda k: BaseHandler(), on_connected=lambda k, cn: connected.append(k),
               spawn=lambda coro: tasks.append(asyncio.ensure_future(coro)),
               backpressure_cause=lambda: None, connect=fake_connect)
    c._locations = {1: StmgrLocation(1, "127.0.0.1", 4000, 1)}
    with caplog.at_level(logging.INFO, "clique"):
        c.ensure(1)
        await asyncio.wait_for(tasks[0], 5)
    assert attempts == [("127.0.0.1", 4000)] * 3
    assert connected == [1] and c.get(1) is conn
    assert "stream manager 1 at 127.0.0.1:4000 not reachable (HandshakeError: server 127.0.0.1:4000 failed " \
           "authentication: wrong topology secret); retrying in 0.0 s" in caplog.text


async def test_a_peer_that_left_the_plan_is_no_longer_tried(monkeypatch) -> None:
    monkeypatch.setattr(clique_mod, "RETRY_S", 0.01)
    attempts: list[int] = []
    tasks: list[asyncio.Task[None]] = []

    async def failing(host, port, handler, secret, **kw):
        attempts.append(port)
        raise HandshakeError("refused")

    c = Clique(container=0, secret=b"s", log=logging.getLogger("clique"), max_frame=1 << 20,
               handler=lambda k: BaseHandler(), on_connected=lambda k, cn: None,
               spawn=lambda coro: tasks.append(asyncio.ensure_future(coro)),
               backpressure_cause=lambda: None, connect=failing)
    c._locations = {1: StmgrLocation(1, "127.0.0.1", 4000, 1)}
    c.ensure(1)
    await asyncio.sleep(0.1)
    c._locations = {}  # a newer plan without container 1
    await asyncio.wait_for(tasks[0], 5)
    assert attempts and c.get(1) is None
