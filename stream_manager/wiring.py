"""The stream manager's composition root: its parts, built once in dependency order, each
given what it needs explicitly: constructor arguments, bound methods of parts made before it,
and small objects that stand between two parts that need each other. No closure reads an
attribute assigned later and no part's attribute is set from here after it is made
(tests/unit/project/test_structure.py checks ``build``).

Three cycles exist between the parts; each is closed here, by name:
- the forwarder delivers to the clique's connections and the clique releases held frames
  through the forwarder: both see the ``peers`` dict (the clique writes it, ``Connections``
  reads it for the forwarder and the checkpoint relay), and ``PeerLinks`` (made after the
  forwarder) is the clique's handler of each peer connection and its ``on_connected``;
- the forwarder hands ack batches to the ack service, which sends its results through the
  forwarder: ``forwarder.ack_batches_to`` closes it once both exist (the one call of its kind);
- the checkpoint relay reports to the master and the master link passes the master's
  commands to the relay: both hold the ``MasterChannel`` (the registered connection).
The stream manager's own decisions over several parts come in through ``Events``; the port it
listens on, known only once it listens, reaches the master link through ``listening_on``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from heron_py.common.container_layout import ContainerLayout
from heron_py.common.framing import MsgType
from heron_py.common.handshake import PeerIdentity
from heron_py.common.metrics_link import MetricsLink
from heron_py.common.net import DEFAULT_LIVENESS, Connection, Counters, Liveness, Routed, Routes, on_raw
from heron_py.common.tls import PeerTls
from heron_py.state import StateManager
from stream_manager.acking import AckService
from stream_manager.backpressure import BackpressureState, ConnKey
from stream_manager.checkpoints import CheckpointRelay
from stream_manager.clique import Clique
from stream_manager.drain import Drainer
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
    drainer: Drainer
    master: MasterLink
    metrics_link: MetricsLink


class Connections:
    """Our connections: the instances' and the clique's dicts, read as they are at each call.
    The forwarder looks one up per frame (its ``Destinations``); the checkpoint relay takes
    them all, as lists (a close while it sends cannot change what it iterates)."""

    def __init__(self, instances: dict[int, Connection], peers: dict[int, Connection]) -> None:
        self._instances = instances
        self._peers = peers

    def instance(self, task: int) -> Connection | None:
        return self._instances.get(task)

    def peer(self, container: int) -> Connection | None:
        return self._peers.get(container)

    def all_instances(self) -> list[Connection]:
        return list(self._instances.values())

    def all_peers(self) -> list[Connection]:
        return list(self._peers.values())


class PeerLinks:
    """The clique's side of the other parts: the handler of our connection to each peer (what
    the peer may send back on it, and its writing and closing, which are the stream manager's
    events), and what follows its connecting: the frames held for that peer go out."""

    def __init__(self, events: Events, forwarder: Forwarder) -> None:
        self._events = events
        self._forwarder = forwarder
        # batches only (peers send their own data on their own connections; these are kept for
        # a peer that does otherwise)
        self._routes = Routes("stmgr's outbound link", [on_raw("stmgr", MsgType.TUPLE_BATCH, self.route),
                                                        on_raw("stmgr", MsgType.ACK_BATCH, self.route)])

    def handler(self, container: int) -> PeerOut:
        return PeerOut(self._events, self._routes, container)

    def connected(self, container: int, conn: Connection) -> None:
        self._forwarder.release(ConnKey.stmgr(container), conn)

    def route(self, conn: Connection, frame: bytes) -> None:
        self._forwarder.route(frame)


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
    conns = Connections(instances.conns, peers)
    # held frames count toward backpressure; a drop of in-flight data is a loss (effectively once)
    forwarder = Forwarder(conns, log=log, routing=RoutingTable(container), on_held=events.on_writing,
                          on_loss=events.data_lost)
    acks = AckService(send=forwarder.send_to_task, log=log)
    forwarder.ack_batches_to(acks.on_ack_batch)  # the second cycle, closed
    channel = MasterChannel()  # the third cycle: the relay reports on it, the link sets it
    ckpt = CheckpointRelay(container, log, to_master=channel.send, instances=conns.all_instances,
                           instance=instances.get, local_spouts=forwarder.local_spouts, peers=conns.all_peers,
                           discard_held=forwarder.discard_old_run)
    peer_links = PeerLinks(events, forwarder)
    clique = Clique(container=container, secret=site.secret, log=log, max_frame=site.max_frame, tls=site.tls,
                    liveness=site.liveness, peers=peers, handler=peer_links.handler,
                    on_connected=peer_links.connected, spawn=spawn, backpressure_cause=bp.local_cause,
                    fence=ckpt.fence_frame)
    metrics = StreamManagerMetrics(container=container, bp=bp, forwarder=forwarder, acks=acks, instances=instances,
                                   clique=clique, counters=counters, spouts_held=events.spouts_held)
    drainer = Drainer(container, acks, channel.send, spawn, clock=clock)
    master = MasterLink(topology=site.topology, container=container, host=site.host, secret=site.secret,
                        state=site.state, tls=site.tls, liveness=site.liveness, log=log, max_frame=site.max_frame,
                        channel=channel, unanswered=ckpt.losses.unanswered,
                        routes=master_routes(events.on_new_pplan, log, [*ckpt.master_routes(), *drainer.routes()]),
                        instance_infos=instances.infos, metrics=metrics.for_master)
    # the metrics manager is always in this container, on loopback
    metrics_link = MetricsLink(mm_file=ContainerLayout.beside(site.port_file).metricsmgr, host=LOOPBACK,
                               secret=site.secret, role="stmgr", peer_id=str(container),
                               expect=PeerIdentity("metricsmgr", str(container)), log=log, max_frame=site.max_frame,
                               report=metrics.report, liveness=site.liveness,
                               interval=events.metrics_interval)
    return Parts(counters=counters, bp=bp, instances=instances, forwarder=forwarder, acks=acks, ckpt=ckpt,
                 clique=clique, metrics=metrics, drainer=drainer, master=master, metrics_link=metrics_link)
