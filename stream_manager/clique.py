"""Outbound connections to the other stream managers of the topology (the clique).

One connection per peer container, made from the physical plan's locations and retried
until it succeeds or the plan no longer has the peer. A lost connection is made again; a
peer whose address changed in a new plan (it restarted elsewhere) gets a fresh one. Frames
arrive from peers on their own outbound connections (our listening port), so these
connections only carry what we send: batches and our backpressure notices.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from heron_py.common.handshake import HandshakeError, PeerIdentity
from heron_py.common.net import DEFAULT_LIVENESS, Connection, FrameHandler, Liveness, connect
from heron_py.common.tls import PeerTls, tls_client_args
from heron_py.common.wire import encode_msg
from heron_py.planner.model import PhysicalPlan, StmgrLocation
from proto import heron_py_pb2 as pb

RETRY_S = 0.3  # the first retry's delay; doubled per failure up to RETRY_MAX_S
RETRY_MAX_S = 5.0


@dataclass(frozen=True)
class PeerAddress:
    host: str
    port: int


class Clique:
    def __init__(self, *, container: int, secret: bytes, log: logging.Logger, max_frame: int,
                 handler: Callable[[int], FrameHandler],
                 on_connected: Callable[[int, Connection], None],
                 spawn: Callable[[Coroutine[Any, Any, None]], None],
                 backpressure_cause: Callable[[], str | None], tls: PeerTls | None = None,
                 liveness: Liveness = DEFAULT_LIVENESS,
                 fence: Callable[[], bytes | None] = lambda: None,
                 connect: Callable[..., Coroutine[Any, Any, Connection]] = connect,
                 peers: dict[int, Connection] | None = None) -> None:
        """``handler(c)`` is the handler of the connection to container c; ``on_connected``
        runs once it is up (held frames go out); ``backpressure_cause()`` is not None while
        we are in backpressure, so a peer that connects late is told at once. ``peers``: the
        dict of the connections up, shared with their readers (the forwarder's destinations)."""
        self.container = container
        self.peers: dict[int, Connection] = peers if peers is not None else {}
        self._at: dict[int, PeerAddress] = {}  # where each connection in peers was made to
        self._connecting: set[int] = set()
        self._locations: dict[int, StmgrLocation] = {}
        self._limits: tuple[int, int] | None = None
        self._secret = secret
        self._tls = tls
        self._liveness = liveness  # the topology's heartbeats, on every peer link
        self._log = log
        self._max_frame = max_frame
        self._handler = handler
        self._on_connected = on_connected
        self._spawn = spawn
        self._bp_cause = backpressure_cause
        self._fence = fence  # effectively once: the restore fence a new connection starts with
        self._running = True
        self._connect_fn = connect  # net.connect; a test's fake

    def get(self, container: int) -> Connection | None:
        return self.peers.get(container)

    def set_plan(self, plan: PhysicalPlan) -> None:
        """Connects to every other stream manager of the plan; a peer that moved gets a fresh connection."""
        self._locations = {s.container: s for s in plan.stmgrs}
        for s in plan.stmgrs:
            peer = self.peers.get(s.container)
            if peer is not None and self._at.get(s.container) != PeerAddress(s.host, s.port):
                # aborted, not closed: a graceful close would wait to flush to the old address
                peer.abort(f"stream manager {s.container} moved to {s.host}:{s.port}")
                del self.peers[s.container]
        for s in plan.stmgrs:
            if s.container != self.container:
                self.ensure(s.container)

    def set_write_limits(self, high: int, low: int) -> None:
        self._limits = (high, low)
        for conn in self.peers.values():
            conn.set_write_limits(high, low)

    def ensure(self, container: int) -> None:
        if not self._running or container in self.peers or container in self._connecting:
            return
        self._connecting.add(container)
        self._spawn(self._connect(container))

    async def _connect(self, container: int) -> None:
        delay = RETRY_S
        try:
            while self._running:
                loc = self._locations.get(container)  # read again after each wait: a newer plan may move it
                if loc is None:
                    return  # no longer in the plan
                try:
                    # only that container's stream manager: an old location may now be another's
                    conn = await self._connect_fn(loc.host, loc.port, self._handler(container), self._secret,
                                                  role="stmgr", peer_id=str(self.container), log=self._log,
                                                  max_frame=self._max_frame, liveness=self._liveness,
                                                  expect=PeerIdentity("stmgr", str(container)),
                                                  **tls_client_args(self._tls))
                except (OSError, HandshakeError) as e:
                    # a HandshakeError too: an old port now answered by another daemon, or a peer
                    # mid-restart; giving up would leave its frames held until they overflow
                    self._log.info("stream manager %d at %s:%d not reachable (%s: %s); retrying in %.1f s",
                                   container, loc.host, loc.port, type(e).__name__, e, delay)
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, RETRY_MAX_S)
                    continue
                self._connected(container, conn, loc)
                return
        finally:
            self._connecting.discard(container)

    def _connected(self, container: int, conn: Connection, loc: StmgrLocation) -> None:
        self._at[container] = PeerAddress(loc.host, loc.port)
        if self._limits is not None:
            conn.set_write_limits(*self._limits)
        conn.send_msg(pb.StmgrHello(container=self.container))
        fence = self._fence()
        if fence is not None:  # before any batch: the peer then knows they are the new run's
            conn.send(fence)
        cause = self._bp_cause()
        if cause is not None:
            conn.send_msg(pb.BackPressure(container=self.container, start=True, cause=cause))
        self.peers[container] = conn
        self._log.info("connected to stream manager %d at %s:%d", container, loc.host, loc.port)
        self._on_connected(container, conn)

    def lost(self, container: int, conn: Connection) -> None:
        """The connection to ``container`` closed: forget it and connect again."""
        if self.peers.get(container) is conn:
            del self.peers[container]
            self._log.warning("lost connection to stream manager %d; reconnecting", container)
            self.ensure(container)

    def connections(self) -> list[Connection]:
        return list(self.peers.values())

    def broadcast_backpressure(self, start: bool, cause: str) -> None:
        msg = encode_msg(pb.BackPressure(container=self.container, start=start, cause=cause))
        for conn in self.peers.values():
            conn.send(msg)
        self._log.info("broadcast %s to %d peers", "StartBackPressure" if start else "StopBackPressure",
                       len(self.peers))

    def close(self, reason: str) -> None:
        """Stops connecting and closes every peer connection."""
        self._running = False
        for conn in self.peers.values():
            conn.close(reason)
