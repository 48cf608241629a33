"""The stream manager daemon: the wiring of its parts.

One listening port serves both its local instances and the other stream managers of the
clique; the handshake's role says which a connection is. For sending to another container
it keeps one outbound connection per peer. Tuple batches are routed on their 12-byte
header and forwarded as the same bytes: the stream manager never unpickles a tuple.

The parts, each with its own job: ``routing`` (where each task lives), ``forwarder`` (send,
hold, release, drop), ``acking`` (XOR tracking, ACK_RESULT frames), ``clique`` (connections
to the peers), ``instances`` (the local instances' connections), ``backpressure`` (the
decisions), ``metrics`` (both report formats) and ``links`` (master and metrics manager).
This module owns the event handlers and the decisions that touch several parts.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from heron_py.common.config import MB, ConfigError, LinkConfig, StreamManagerConfig, effectively_once
from heron_py.common.container_layout import ContainerLayout
from heron_py.common.daemon import DaemonBase, FatalError, setup_logging, write_atomically
from heron_py.common.framing import DEFAULT_MAX_FRAME, MsgType, batch_src, frame_type
from heron_py.common.guard import RateLimitedLog
from heron_py.common.net import (
    DEFAULT_LIVENESS,
    BaseHandler,
    Connection,
    Liveness,
    Routes,
    on,
    on_raw,
    relay,
    serve,
    serve_unix,
)
from heron_py.common.tls import PeerTls
from heron_py.common.wire import decode_as, encode_msg
from heron_py.planner.model import PhysicalPlan
from heron_py.state import StateManager
from heron_py.state import config as statecfg
from heron_py.state.stores import run_with_state
from proto import heron_py_pb2 as pb
from stream_manager.backpressure import Action, ConnKey, describe
from stream_manager.forwarder import DropReason
from stream_manager.owners import Owners
from stream_manager.ratelimit import output_rates
from stream_manager.routing import RoutingTable
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
        inbound = _Inbound(self)  # stateless: one handler and one routing table for every connection
        routes = inbound.routes()
        try:
            self._server = await serve(self.host, 0, lambda: inbound, site.secret, role="stmgr",
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
            self._local_server = await serve_unix(sock, lambda: inbound, site.secret, role="stmgr",
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
        if task is not None:
            self.apply(self.bp.connection_low(ConnKey.task(task)))
            self.log.warning("instance task %d disconnected", task)
            self.data_lost(f"the connection of instance task {task} closed")


class _Inbound(BaseHandler):
    """Accepted connections, a local instance's or a peer stream manager's: the lifecycle of
    each, and the routes of what each role may send (built once, at start; a message a role may
    not send is refused by the connection itself, counted as ``__bad-frames/role``). A message
    that names a task or a container is taken only from its owner (``owners.Owners``)."""

    def __init__(self, sm: StreamManager) -> None:
        self.sm = sm
        self.owners = Owners(sm.counters, sm.refuse_log)
        self.peers_in: dict[int, Connection] = {}  # each peer's newest inbound connection

    def routes(self) -> Routes:
        sm, ckpt, fwd, own = self.sm, self.sm.ckpt, self.sm.forwarder, self.owners
        return Routes("stmgr", [
            # the hot path: raw frames, routed on their header (never decoded here)
            on_raw("instance", MsgType.TUPLE_BATCH, self.instance_batch),
            on_raw("instance", MsgType.CKPT_MARKER, self.instance_marker),
            on_raw("instance", MsgType.ACK_BATCH, self.instance_acks),
            on_raw("stmgr", MsgType.TUPLE_BATCH, self.peer_batch),
            on_raw("stmgr", MsgType.CKPT_MARKER, self.peer_marker),
            on_raw("stmgr", MsgType.ACK_BATCH, lambda conn, frame: fwd.route(frame)),
            on("instance", MsgType.REGISTER_INSTANCE_REQUEST, pb.RegisterInstanceRequest, self.register),
            on("instance", MsgType.INSTANCE_METRICS, pb.InstanceMetrics,
               own.of_task(MsgType.INSTANCE_METRICS, lambda conn, m: sm.instances.metrics.__setitem__(m.task_id, m))),
            on("instance", MsgType.INSTANCE_READY, pb.InstanceReady,
               own.of_task(MsgType.INSTANCE_READY, self.instance_ready)),
            relay("instance", MsgType.CHECKPOINT_SAVED, self.checkpoint_saved),
            on("instance", MsgType.STATE_RESTORED, pb.StateRestored,
               own.of_task(MsgType.STATE_RESTORED, ckpt.on_state_restored)),
            on("stmgr", MsgType.RESTORE_FENCE, pb.RestoreFence,
               own.of_container(MsgType.RESTORE_FENCE, ckpt.on_peer_fence)),
            on("stmgr", MsgType.STMGR_HELLO, pb.StmgrHello, own.of_container(MsgType.STMGR_HELLO, self.peer_hello)),
            on("stmgr", MsgType.BACKPRESSURE, pb.BackPressure,
               own.of_container(MsgType.BACKPRESSURE, lambda conn, m: sm.on_peer_backpressure(m))),
        ])

    def instance_batch(self, conn: Connection, frame: bytes) -> None:
        """A tuple batch or marker of a local instance: only its registered task's own."""
        sm = self.sm
        if conn.context is None or batch_src(frame) != conn.context:
            self.refuse_batch(conn, frame_type(frame), frame)
        elif sm.ckpt.restore_id and not sm.ckpt.admits(conn):
            sm.forwarder.drop(DropReason.OLD_RUN, frame)  # the run a restore rolled back
        else:
            sm.forwarder.route(frame)
            if sm.instances.buckets:  # topology.component.output.bps: only a limited task pays
                self.meter(conn.context, len(frame))

    def instance_marker(self, conn: Connection, frame: bytes) -> None:
        """A checkpoint marker stops here while a loss we reported is unresolved."""
        if self.sm.ckpt.losses.admits_marker():
            self.instance_batch(conn, frame)

    def peer_marker(self, conn: Connection, frame: bytes) -> None:
        if self.sm.ckpt.losses.admits_marker():
            self.peer_batch(conn, frame)

    def peer_hello(self, conn: Connection, msg: pb.StmgrHello) -> None:
        """A peer's new connection. Another one from the same peer still open is half-open (the
        peer lost it without a FIN: a host that vanished, a reset we never saw): what was in
        flight on it is lost, and it is closed now rather than when its silence is noticed."""
        old = self.peers_in.get(msg.container)
        self.peers_in[msg.container] = conn
        if old is not None and old is not conn and old.is_open:
            self.sm.data_lost(f"a second connection from stream manager {msg.container} while its first was open")
            old.close("the peer opened a new connection: this one is half-open")

    def meter(self, task: int, nbytes: int) -> None:
        instances = self.sm.instances
        wait = instances.meter(task, nbytes)
        if wait > 0.0:
            asyncio.get_running_loop().call_later(wait, instances.rate_wait_over, task)

    def instance_acks(self, conn: Connection, frame: bytes) -> None:
        if conn.context is None or batch_src(frame) != conn.context:
            self.refuse_batch(conn, MsgType.ACK_BATCH, frame)
        else:
            self.sm.forwarder.route(frame)  # acks pass the fence: they only resolve roots

    def peer_batch(self, conn: Connection, frame: bytes) -> None:
        sm = self.sm
        if sm.ckpt.restore_id and not sm.ckpt.admits(conn):
            sm.forwarder.drop(DropReason.OLD_RUN, frame)
        else:
            sm.forwarder.route(frame)

    def refuse_batch(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        """A batch from a connection that may not send it (a task sends only its own)."""
        self.owners.refuse(conn, msg_type, f"with source task {batch_src(frame)}", "refused batch")

    def instance_ready(self, conn: Connection, msg: pb.InstanceReady) -> None:
        self.sm.instances.ready[msg.task_id] = msg.pid
        self.sm.master.heartbeat(with_metrics=False)  # the master learns it now

    def checkpoint_saved(self, conn: Connection, frame: bytes) -> None:
        """An instance's report, relayed to the master as it came once it is its own task's."""
        msg = decode_as(pb.CheckpointSaved, MsgType.CHECKPOINT_SAVED, frame, conn.peer_name)
        if self.owners.task(conn, MsgType.CHECKPOINT_SAVED, msg.task_id):
            self.sm.ckpt.to_master(frame)

    def register(self, conn: Connection, req: pb.RegisterInstanceRequest) -> None:
        sm, ident = self.sm, conn.identity
        assert ident is not None
        if str(req.task_id) != ident.peer_id or (not sm.forwarder.routing.is_local(req.task_id)
                                                 and sm.pplan is not None):
            error = f"task {req.task_id} does not run in container {sm.container}"
            conn.send_msg(pb.RegisterInstanceResponse(ok=False, error=error))
            conn.close(f"refused registration: {error}")
            return
        sm.register_instance(conn, req)

    def on_writing(self, conn: Connection, paused: bool) -> None:
        if isinstance(conn.context, int):
            self.sm.on_writing(ConnKey.task(conn.context), paused)

    def on_close(self, conn: Connection) -> None:
        ident = conn.identity
        self.sm.ckpt.on_closed(conn)
        if ident is not None and ident.role == "stmgr":
            for peer, c in list(self.peers_in.items()):
                if c is conn:
                    del self.peers_in[peer]
            self.sm.data_lost(f"the connection from stream manager {ident.peer_id} closed")
            # a peer that dies while in backpressure must not leave us paused
            try:
                peer = int(ident.peer_id)
            except ValueError:
                return
            if peer in self.sm.bp.peers:
                self.sm.apply(self.sm.bp.peer_stop(peer))
            return
        self.sm.instance_lost(conn)


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
