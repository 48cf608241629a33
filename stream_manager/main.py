"""The stream manager daemon: the wiring of its parts.

One listening port serves both its local instances and the other stream managers of the
clique; the handshake's role says which a connection is, and the connection then takes that
side's server (``servers``: ``InstanceServer``, ``StmgrServer``, as Heron's). For sending to another container
it keeps one outbound connection per peer. Tuple batches are routed on their 12-byte
header and forwarded as the same bytes: the stream manager never unpickles a tuple.

The parts, each with its own job: ``routing`` (where each task lives), ``forwarder`` (send,
hold, release, drop), ``acking`` (XOR tracking, ACK_RESULT frames), ``clique`` (connections
to the peers), ``instances`` (the local instances' connections), ``backpressure`` (the
decisions), ``metrics`` (both report formats), ``links`` (master and metrics manager) and
``servers`` (the port's two sides). This module owns the lifecycle and the decisions that touch
several parts.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from heron_py.common.config import MB, ConfigError, LinkConfig, StreamManagerConfig, effectively_once
from heron_py.common.container_layout import ContainerLayout
from heron_py.common.daemon import DaemonBase, FatalError, setup_logging, write_atomically
from heron_py.common.framing import DEFAULT_MAX_FRAME
from heron_py.common.guard import RateLimitedLog
from heron_py.common.net import (
    DEFAULT_LIVENESS,
    Connection,
    Liveness,
    serve,
    serve_unix,
)
from heron_py.common.tls import PeerTls
from heron_py.common.wire import encode_msg
from heron_py.planner.model import PhysicalPlan, has_task
from heron_py.state import StateManager
from heron_py.state import config as statecfg
from heron_py.state.stores import run_with_state
from proto import heron_py_pb2 as pb
from stream_manager.backpressure import Action, ConnKey, describe
from stream_manager.instances import INSTANCE_SHARE
from stream_manager.ratelimit import output_rates
from stream_manager.routing import RoutingTable
from stream_manager.servers import Inbound
from stream_manager.wiring import Site, build

LOOPBACK = "127.0.0.1"


class StreamManager(DaemonBase):
    """The lifecycle (listen, run the links, stop) and the decisions that touch several parts;
    the parts themselves are built by ``wiring.build``."""

    def __init__(self, *, topology: str, container: int, secret: bytes, state: StateManager,
                 port_file: Path, log: logging.Logger, host: str = "127.0.0.1",
                 max_frame: int = DEFAULT_MAX_FRAME, tls: PeerTls | None = None,
                 liveness: Liveness = DEFAULT_LIVENESS) -> None:
        self.site = Site(topology=topology, container=container, host=host, secret=secret, state=state,
                         port_file=port_file, log=log, max_frame=max_frame, tls=tls, liveness=liveness)
        self.topology = topology
        self.container = container
        self.host = host
        self.port = 0
        self.log = log
        self._server: asyncio.Server | None = None
        self._local_server: asyncio.Server | None = None
        self._sock_path = ""
        self.refuse_log = RateLimitedLog(log)
        self.pplan: PhysicalPlan | None = None
        self.config = StreamManagerConfig()  # replaced by each physical plan's
        self.effectively_once = False  # the plan's mode (set with each plan)
        parts = self.parts = build(self.site, self, self._spawn)
        self.counters, self.bp, self.instances = parts.counters, parts.bp, parts.instances
        self.forwarder, self.acks, self.ckpt, self.clique = parts.forwarder, parts.acks, parts.ckpt, parts.clique
        self.metrics, self.master, self.metrics_link = parts.metrics, parts.master, parts.metrics_link

    # the plan's config, read at each use: each physical plan replaces it
    def metrics_interval(self) -> float:
        return self.config.metrics_interval_s

    def message_timeout(self) -> float:
        return self.config.message_timeout_s

    # --- lifecycle ---
    async def start(self) -> None:
        self._begin()
        assert self._stopped is not None
        site = self.site
        # the port's two servers, the instances' and the peers': each connection takes its role's
        inbound = Inbound(self)
        routes = inbound.routes()
        try:
            self._server = await serve(self.host, 0, lambda: inbound.handler, site.secret, role="stmgr",
                                       log=self.log, counters=self.counters, max_frame=site.max_frame,
                                       ssl=site.tls.server if site.tls else None, routes=routes,
                                       liveness=site.liveness, server_id=str(self.container))
        except OSError as e:
            raise FatalError(f"stream manager of container {self.container}: cannot listen on "
                             f"{self.host}: {e}") from e
        self.port = self._server.sockets[0].getsockname()[1]
        self.master.listening_on(self.port)
        # the container's instances come through a Unix socket (no TCP stack on the way)
        sock = self._sock_path = ContainerLayout.beside(site.port_file).bind_stmgr_socket()
        try:
            self._local_server = await serve_unix(sock, lambda: inbound.handler, site.secret, role="stmgr",
                                                  log=self.log, counters=self.counters, max_frame=site.max_frame,
                                                  routes=routes, liveness=site.liveness,
                                                  server_id=str(self.container))
        except OSError as e:
            raise FatalError(f"stream manager of container {self.container}: cannot listen on {sock}: {e}") from e
        write_atomically(site.port_file, str(self.port))
        self.log.info("stream manager of container %d listening on %s:%d and %s", self.container, self.host,
                      self.port, sock)
        self._spawn(self.master.run(self._stopped))
        self._spawn(self.acks.run_rotation(self.message_timeout))
        self._spawn(self.metrics_link.run(self._stopped))

    def stop(self) -> None:
        if not self._begin_stop():
            return
        for server in (self._server, self._local_server):
            if server is not None:
                server.close()
        if self._local_server is not None:
            ContainerLayout.beside(self.site.port_file).release_stmgr_socket(self._sock_path)
        self.instances.close("stream manager stopping")
        self.clique.close("stream manager stopping")
        self.master.close("stream manager stopping")

    # --- physical plan ---
    def on_new_pplan(self, raw: bytes) -> None:
        plan = PhysicalPlan.from_dict(json.loads(raw))
        if self.pplan is not None and plan.version <= self.pplan.version:
            return  # a stale plan that arrived late
        self.pplan = plan
        # the plan reaches the local instances before any frame held for them, so an instance
        # has its plan when its first batch comes (a spout's first batch, sent while this
        # stream manager waited for the plan, would otherwise reach an instance still waiting
        # for its own; instance.execution keeps such early items too)
        self.instances.broadcast(encode_msg(pb.NewPhysicalPlan(pplan_json=raw)))
        self.forwarder.set_routing(RoutingTable.build(plan, self.container))  # routes frames held for it
        self._apply_config(plan)
        self.log.info("physical plan v%d: state %s, %d tasks, %d containers", plan.version, plan.state.value,
                      len(plan.packing.tasks), plan.packing.num_containers)
        self.clique.set_plan(plan)

    def _apply_config(self, plan: PhysicalPlan) -> None:
        try:
            self.config = StreamManagerConfig.from_config(plan.topology.config)
        except ConfigError as e:
            # submit refuses bad values, so this is a plan written by hand or by an older version
            self.log.error("%s; keeping the previous stream manager config", e)
        cfg = self.config
        self.effectively_once = effectively_once(plan.topology.config)
        self.forwarder.drop_on_backpressure = cfg.drop_on_backpressure
        self.forwarder.held_high = cfg.high_watermark
        if self.effectively_once:  # the mode of a topology never changes while it runs
            self.instances.hold_output(INSTANCE_SHARE)
        self.instances.set_write_limits(cfg.high_watermark, cfg.low_watermark)
        self.clique.set_write_limits(cfg.high_watermark, cfg.low_watermark)
        if self.spouts_held():  # the plan may name spouts that registered before it came
            self.instances.set_reading(self.forwarder.routing.local_spouts, paused=True)
        try:
            self.instances.set_rates(output_rates(plan, self.container))
        except ConfigError as e:
            self.log.error("%s; keeping the previous output rate limits", e)

    # --- backpressure ---
    def spouts_held(self) -> bool:
        """Whether local spouts must not be read now (never in droptuples mode)."""
        return self.bp.spouts_paused and not self.config.drop_on_backpressure

    def apply(self, actions: list[Action]) -> None:
        for a in actions:
            if a is Action.PAUSE_SPOUTS or a is Action.RESUME_SPOUTS:
                if self.config.drop_on_backpressure:
                    continue  # spouts keep going; the forwarder drops what a slow connection cannot take
                paused = a is Action.PAUSE_SPOUTS
                self.instances.set_reading(self.forwarder.routing.local_spouts, paused=paused)
                self.log.info("%s local spouts", "paused" if paused else "resumed")
            else:
                self.clique.broadcast_backpressure(a is Action.BROADCAST_START, describe(self.bp.slow))

    def on_writing(self, key: ConnKey, paused: bool) -> None:
        if paused:
            self.log.info("connection to %s above the high watermark (%d MB; its buffer, or frames held for it)", key,
                          self.config.high_watermark // MB)
            self.apply(self.bp.connection_high(key))
        else:
            self.apply(self.bp.connection_low(key))

    def on_peer_backpressure(self, msg: pb.BackPressure) -> None:
        if msg.start:
            self.log.info("stream manager %d is in backpressure (%s)", msg.container, msg.cause)
            self.apply(self.bp.peer_start(msg.container))
        else:
            self.log.info("stream manager %d left backpressure", msg.container)
            self.apply(self.bp.peer_stop(msg.container))

    def peer_lost(self, container: int, conn: Connection) -> None:
        self.apply(self.bp.connection_low(ConnKey.stmgr(container)))  # its buffer is gone with it
        self.clique.lost(container, conn)
        self.data_lost(f"the connection to stream manager {container} closed")

    def data_lost(self, reason: str) -> None:
        """In-flight frames may be gone (a data-path connection closed, a counted drop): in
        effectively once, every task rolls back to the last complete checkpoint, or the next
        one would make the loss permanent (at least once replays by itself)."""
        stopping = self._stopped is not None and self._stopped.is_set()
        if self.effectively_once and not stopping:
            self.ckpt.loss(reason)

    # --- instances ---
    def register_instance(self, conn: Connection, req: pb.RegisterInstanceRequest) -> None:
        task = req.task_id
        if self.instances.add(conn, task, req.pid):
            self.data_lost(f"instance task {task} registered again while its old connection was open")
        conn.set_write_limits(self.config.high_watermark, self.config.low_watermark)
        if self.forwarder.routing.is_local_spout(task) and self.spouts_held():
            conn.pause_reading()
        raw = json.dumps(self.pplan.to_dict()).encode() if self.pplan is not None else b""
        conn.send_msg(pb.RegisterInstanceResponse(ok=True, pplan_json=raw))
        self.ckpt.on_instance_registered(conn, task)
        self.forwarder.release(ConnKey.task(task), conn)
        self.log.info("instance task %d (%s, pid %d) registered", task, req.component, req.pid)
        if self.pplan is None:
            # the master holds a new topology's first plan until every instance registered (as
            # Heron's stream manager registers once its instances have): it learns this one now
            self.master.heartbeat(with_metrics=False)

    def instance_lost(self, conn: Connection) -> None:
        task = self.instances.remove(conn)
        if task is None:
            return
        self.apply(self.bp.connection_low(ConnKey.task(task)))
        if self.pplan is not None and not has_task(self.pplan, task):
            # a rescale removed it (or added it and has not switched yet): no tuple of the run
            # is routed to it, and what it sent is fenced off, so nothing of the run is lost
            self.log.info("instance task %d, which the plan does not hold, disconnected", task)
            return
        self.log.warning("instance task %d disconnected", task)
        self.data_lost(f"the connection of instance task {task} closed")


def main(argv: list[str] | None = None) -> int:
    ap = statecfg.daemon_parser("stream_manager")
    ap.add_argument("--container", type=int, required=True)
    ap.add_argument("--port-file", type=Path, required=True)
    args = ap.parse_args(argv)
    log = setup_logging(f"stmgr[{args.container}]")

    def make(state: StateManager) -> StreamManager:
        secret = args.secret_file.read_bytes()
        links = _link_config(state, args.topology, secret)
        return StreamManager(topology=args.topology, container=args.container, secret=secret,
                             state=state, port_file=args.port_file, log=log, host=args.host,
                             tls=PeerTls.load(args.tls_file, args.topology), max_frame=links.max_frame,
                             liveness=links.liveness)

    return run_with_state(args, log, make)


def _link_config(state: StateManager, topology: str, secret: bytes) -> LinkConfig:
    """The topology's frame limit and heartbeats, read once before any connection: instances
    connect before the plan comes, and their frames are checked against the same limit their
    emitters use. Submit refuses bad values, so a ConfigError here is a definition written by
    hand (or by an older version). The document's signature is checked under ``secret`` (a
    StateManagerError when it does not match): whoever may write the state store must not set
    our heartbeats or frame limit."""
    topo = state.get_topology(topology, secret)
    if topo is None:
        return LinkConfig()
    return LinkConfig.from_config(topo.config)
