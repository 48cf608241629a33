"""The stream manager's composition root: its parts, built once in dependency order, each
given what it needs explicitly.

Three cycles exist between the parts; each is closed here, by name, instead of by closures
over attributes assigned later:
- the forwarder delivers to the clique's connections and the clique releases held frames
  through the forwarder: both share the ``peers`` dict (the clique writes it, the
  forwarder's destinations read it);
- the forwarder hands ack batches to the ack tracker, which sends its results through the
  forwarder: ``forwarder.on_ack_batch`` is set once both exist;
- the checkpoint relay reports to the master and the master link passes the master's
  commands to the relay: both hold the ``MasterChannel`` (the registered connection).
The stream manager's own decisions over several parts come in through ``Events``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from heron_py.common.framing import MsgType
from heron_py.common.handshake import PeerIdentity
from heron_py.common.metrics_link import MetricsLink
from heron_py.common.net import DEFAULT_LIVENESS, Connection, Counters, Liveness, Routed, Routes, on_raw
from heron_py.common.tls import PeerTls
from heron_py.state import StateManager
from stream_manager.acking import AckService
from stream_manager.backpressure import BackpressureState, ConnKey, describe
from stream_manager.checkpoints import CheckpointRelay
from stream_manager.clique import Clique
from stream_manager.forwarder import Forwarder
from stream_manager.instances import LocalInstances
from stream_manager.links import MasterChannel, MasterLink, master_routes
from stream_manager.metrics import StreamManagerMetrics
from stream_manager.routing import RoutingTable

LOOPBACK = "127.0.0.1"


class Events(Protocol):
    """What the parts tell the stream manager (its decisions that touch several parts)."""

    def on_new_pplan(self, raw: bytes) -> None: ...
    def on_writing(self, key: ConnKey, paused: bool) -> None: ...
    def data_lost(self, reason: str) -> None: ...
    def spouts_held(self) -> bool: ...
    def peer_lost(self, container: int, conn: Connection) -> None: ...
    def metrics_interval(self) -> float: ...


@dataclass(frozen=True)
class Site:
    """Who and where this stream manager is: fixed for the life of the process."""

    topology: str
    container: int
    host: str
    secret: bytes
    state: StateManager
    port_file: Path
    log: logging.Logger
    max_frame: int
    tls: PeerTls | None  # TLS between hosts (heron.network.tls.enabled); None: HMAC handshake only
    # heartbeats of every link it makes or accepts: the topology's, read once before it listens
    liveness: Liveness = DEFAULT_LIVENESS


@dataclass(frozen=True)
class Parts:
    counters: Counters
    bp: BackpressureState
    instances: LocalInstances
    forwarder: Forwarder
    acks: AckService
    ckpt: CheckpointRelay
    clique: Clique
    metrics: StreamManagerMetrics
    master: MasterLink
    metrics_link: MetricsLink


class Destinations:
    """The forwarder's view of our connections: the instances' and the clique's dicts, read
    as they are at each frame."""

    def __init__(self, instances: dict[int, Connection], peers: dict[int, Connection]) -> None:
        self._instances = instances
        self._peers = peers

    def instance(self, task: int) -> Connection | None:
        return self._instances.get(task)

    def peer(self, container: int) -> Connection | None:
        return self._peers.get(container)


def peer_out_routes(forwarder: Forwarder) -> Routes:
    """What a peer may send back on our connection to it: batches only (peers send their own
    data on their own connections; these are kept for a peer that does otherwise)."""

    def route(conn: Connection, frame: bytes) -> None:
        forwarder.route(frame)

    return Routes("stmgr's outbound link", [on_raw("stmgr", MsgType.TUPLE_BATCH, route),
                                            on_raw("stmgr", MsgType.ACK_BATCH, route)])


class PeerOut(Routed):
    """Our connection to the stream manager of ``container``."""

    def __init__(self, events: Events, routes: Routes, container: int) -> None:
        super().__init__(routes)
        self._events = events
        self.container = container

    def on_writing(self, conn: Connection, paused: bool) -> None:
        self._events.on_writing(ConnKey.stmgr(self.container), paused)

    def on_close(self, conn: Connection) -> None:
        self._events.peer_lost(self.container, conn)


def build(site: Site, events: Events, spawn: Callable[[Coroutine[Any, Any, None]], None],
          clock: Callable[[], float] = time.monotonic) -> Parts:
    """Every part, in the order each one's needs exist."""
    log, container = site.log, site.container
    counters = Counters()
    bp = BackpressureState(clock=clock)
    instances = LocalInstances(log, clock)
    peers: dict[int, Connection] = {}  # the clique's connections up (first cycle)
    forwarder = Forwarder(Destinations(instances.conns, peers), log=log)
    forwarder.routing = RoutingTable(container)
    forwarder.on_held = events.on_writing  # held frames count toward backpressure
    forwarder.on_loss = lambda reason: events.data_lost(f"frames dropped ({reason.value})")
    acks = AckService(send=forwarder.send_to_task, log=log)
    forwarder.on_ack_batch = acks.on_ack_batch  # the second cycle, closed
    channel = MasterChannel()  # the third cycle: the relay reports on it, the link sets it
    ckpt = CheckpointRelay(container, log, to_master=channel.send,
                           instances=lambda: list(instances.conns.values()), instance=instances.get,
                           local_spouts=lambda: forwarder.routing.local_spouts,  # replaced with each plan
                           peers=lambda: list(peers.values()), discard_held=forwarder.discard_old_run)
    routes = peer_out_routes(forwarder)
    clique = Clique(container=container, secret=site.secret, log=log, max_frame=site.max_frame, tls=site.tls,
                    liveness=site.liveness,
                    peers=peers, handler=lambda c: PeerOut(events, routes, c),
                    on_connected=lambda c, conn: forwarder.release(ConnKey.stmgr(c), conn), spawn=spawn,
                    backpressure_cause=lambda: describe(bp.slow) if bp.local else None, fence=ckpt.fence_frame)
    metrics = StreamManagerMetrics(container=container, bp=bp, forwarder=forwarder, acks=acks, instances=instances,
                                   clique=clique, counters=counters, spouts_held=events.spouts_held)
    master = MasterLink(topology=site.topology, container=container, host=site.host, secret=site.secret,
                        state=site.state, tls=site.tls, liveness=site.liveness, log=log, max_frame=site.max_frame,
                        channel=channel, unanswered=ckpt.losses.unanswered,
                        routes=master_routes(events.on_new_pplan, log, ckpt.master_routes()),
                        instance_infos=instances.infos, metrics=metrics.for_master)
    # the metrics manager is always in this container, on loopback
    metrics_link = MetricsLink(mm_file=site.port_file.parent / "metricsmgr.json", host=LOOPBACK, secret=site.secret,
                               role="stmgr", peer_id=str(container), expect=PeerIdentity("metricsmgr", str(container)),
                               log=log, max_frame=site.max_frame, report=metrics.report, liveness=site.liveness,
                               interval=events.metrics_interval)
    return Parts(counters=counters, bp=bp, instances=instances, forwarder=forwarder, acks=acks, ckpt=ckpt,
                 clique=clique, metrics=metrics, master=master, metrics_link=metrics_link)
