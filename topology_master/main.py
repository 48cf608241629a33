"""The topology master daemon.

It claims the topology master's location in the state manager (an ephemeral node in
ZooKeeper). If another master holds it, this one waits as a standby and claims it when it
vanishes (see election.py). The active master waits until the stream manager of every
container has registered, then builds the physical plan, stores it and pushes it to every
stream manager. A stream manager that registers again (it was restarted, with a new port)
gets a new plan version pushed to all; a master that took over continues the stored plan's
version and run state. Admin commands from the CLI (activate, deactivate, status) arrive on
the same port, from peers that proved the topology's secret.

This module runs the I/O: the listeners, the election's callbacks and the state writes. The
master's parts are built by wiring.py (``build`` once the topology is read, ``build_active``
when this master becomes the active one) and live beside it: plan_book.py (the rules, pure),
stmgrs.py (the stream managers' connections), admin.py (the CLI's commands), http_api.py
(the HTTP API, pure) and http_server.py (its aiohttp transport), election.py (who is active).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from heron_py.checkpoint.storage import checkpoint_key_beside
from heron_py.common.config import ConfigError, LinkConfig
from heron_py.common.daemon import DaemonBase, FatalError, setup_logging
from heron_py.common.framing import HEADER_SIZE, MsgType
from heron_py.common.handshake import http_admin_token, http_read_token
from heron_py.common.host import heron_home, is_loopback
from heron_py.common.net import BaseHandler, Connection, Counters, Routes, on, on_raw, serve
from heron_py.common.tls import PeerTls
from heron_py.common.wire import ADMIN_RESCALE
from heron_py.planner.model import PackingPlan, PhysicalPlan, TopologyDef, TopologyState
from heron_py.state import StateManager, StateManagerError, TManagerLocation, local_owner
from heron_py.state import config as statecfg
from heron_py.state.stores import run_with_state
from proto import heron_py_pb2 as pb
from topology_master.admin import AdminCommands
from topology_master.checkpoints import CheckpointDriver, driver_metrics, driver_status, tick_forever
from topology_master.election import Role, StateWorker
from topology_master.http_api import Api, MetricsView
from topology_master.http_server import HttpServer, serve_http
from topology_master.plan_book import PlanBook
from topology_master.plan_store import PlanStore
from topology_master.relauncher import Relaunch, Relauncher
from topology_master.rescaler import Rescaler
from topology_master.stmgrs import StmgrLinks
from topology_master.ui_actions import Actions, ActionsCli, detached_cli, scheduler_name
from topology_master.wiring import Parts, Site, build, build_active

# exit code of a master that lost its claim to another: the executor restarts it as a standby
EXIT_STEPPED_DOWN = 3


# an activate/deactivate is answered once the plan carrying it is stored, or after this long
ADMIN_STORE_WAIT_S = 3.0


class TopologyMaster(DaemonBase):
    """The daemon: it runs the listeners, the election's callbacks and the state writes over its
    parts (wiring.py builds them: PlanBook, the rules; StmgrLinks, the stream managers'
    connections; ...), and answers the CLI's commands (AdminCommands) and the HTTP API (Api)."""

    def __init__(self, *, topology: str, secret: bytes, state: StateManager, log: logging.Logger,
                 host: str = "127.0.0.1", standby: bool = False,
                 relaunch: Relaunch | None = None, tls: PeerTls | None = None,
                 ui_cli: ActionsCli | None = None, home: Path | None = None,
                 checkpoint_key: bytes | None = None) -> None:
        self.topology = topology
        self.site = Site(topology=topology, state=state, log=log, home=home or heron_home(),
                         checkpoint_key=checkpoint_key if checkpoint_key is not None else secret,
                         relaunch=relaunch, ui_cli=ui_cli, secret=secret)
        # effectively once: the checkpoints' driver while active (wiring.build_active)
        self.checkpoints: CheckpointDriver | None = None
        self.actions: Actions | None = None
        self._tls = tls
        self.http_scheme = "https" if tls is not None else "http"  # the HTTP API serves HTTPS with TLS on
        self.standby_requested = standby
        self.host = host
        self._secret = secret
        self._state = state
        self._log = log
        self.counters = Counters()
        self._server: asyncio.Server | None = None
        self.started_at = time.time()
        self.port = 0
        self.exit_code = 0
        self._worker = StateWorker(log)
        self.metrics = MetricsView()
        self.admin = AdminCommands(self, os.getpid())
        self.http_port = 0
        self._http: HttpServer | None = None
        self._http_closed: asyncio.Task[None] | None = None
        # set in start(), once the topology's definition has been read (wiring.build)
        self._parts: Parts | None = None
        self._topo: TopologyDef
        self._packing: PackingPlan
        self.book: PlanBook
        self.links: StmgrLinks
        self.plans: PlanStore | None = None
        self.relauncher: Relauncher | None = None
        self.rescaler: Rescaler | None = None

    async def start(self) -> None:
        self._begin()
        loop = asyncio.get_running_loop()
        try:
            topo, packing = await loop.run_in_executor(None, _read_definition, self._state, self.topology,
                                                       self._secret)
        except StateManagerError as e:
            raise FatalError(f"topology master: {e}") from None
        if topo is None or packing is None:
            raise FatalError(f"topology master: topology '{self.topology}' has no definition or packing "
                             f"plan in the state manager; was it submitted?")
        self._topo, self._packing = topo, packing
        try:  # the topology's frame limit and heartbeats, once for every link
            link_config = LinkConfig.from_config(topo.config)
        except ConfigError as e:
            raise FatalError(f"topology master: {e}") from None
        parts = self._parts = build(self.site, topo, packing, self, worker=self._worker, loop=loop,
                                    link_config=link_config)
        self.book, self.plans, self.links = parts.book, parts.plans, parts.links
        self.relauncher, self.actions, self.rescaler = parts.relauncher, parts.actions, parts.rescaler
        if parts.relauncher is not None:
            self._spawn(parts.relauncher.run())
        if parts.metrics_link is not None and self._stopped is not None:
            self._spawn(parts.metrics_link.run(self._stopped))
        try:
            handler = _Handler(self)  # stateless: one handler and one routing table for every connection
            self._server = await serve(self.host, 0, lambda: handler, self._secret, role="tmanager",
                                       log=self._log, counters=self.counters, max_frame=link_config.max_frame,
                                       ssl=self._tls.server if self._tls else None, routes=handler.routes(),
                                       liveness=link_config.liveness)
        except OSError as e:
            raise FatalError(f"topology master: cannot listen on {self.host}: {e}") from e
        self.port = self._server.sockets[0].getsockname()[1]
        # off loopback the API needs a token: nobody exposes it open by accident; a task's log
        # needs one from any other user, and an action the admin token, on loopback too
        # (http_server.py says why); with TLS on, HTTPS: the tokens (and the logs and plans the
        # API serves) never cross in clear
        read = http_read_token(self._secret)
        self._http = await serve_http(Api(self), self.host, token=None if is_loopback(self.host) else read,
                                      action_token=http_admin_token(self._secret), log_token=read,
                                      ssl_context=self._tls.http if self._tls else None)
        self.http_port = self._http.port
        self._log.info("topology master of '%s' listening on %s:%d, HTTP API and web page at %s://%s:%d/%s",
                       self.topology, self.host, self.port, self.http_scheme, self.host, self.http_port,
                       " (started as standby)" if self.standby_requested else "")
        self._state.add_session_listener(parts.standing.on_session)
        parts.election.start()

    async def wait(self) -> int:
        code = await super().wait()
        if self._http_closed is not None:
            await self._http_closed  # stop() cannot await the HTTP runner's cleanup; the exit path does
        return code

    def location(self) -> TManagerLocation:
        return TManagerLocation(self.host, self.port, os.getpid(), self.http_port, local_owner(), self.http_scheme)

    @property
    def active(self) -> bool:
        # claimed *and* the stored plan read (election.Standing says why both)
        parts = self._parts
        return parts is not None and parts.standing.is_active()

    def on_role(self, role: Role, holder: TManagerLocation | None) -> None:
        """The election's: this master's role changed."""
        if role is Role.STANDBY:
            h = f"{holder.host}:{holder.port} pid {holder.pid}" if holder else "another master"
            self._log.info("standby: the topology master's location is held by %s; waiting for it to vanish", h)
        elif role is Role.ACTIVE:
            self._worker.submit(_takeover_read, self._state, self.topology).add_done_callback(
                functools.partial(self._loop_call, self._became_active))
        elif role is Role.STOPPED:
            self._log.error("another topology master (%s) holds the location after our ZooKeeper session "
                            "came back; stepping down", holder.to_dict() if holder else "?")
            self.exit_code = EXIT_STEPPED_DOWN
            self.stop()

    def _loop_call(self, fn: Any, *args: Any) -> None:
        loop = self._server.get_loop() if self._server is not None else None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)

    def metrics_report(self) -> dict[str, Any]:
        """The master's own metrics for its container's metrics manager: effectively once's
        failing and waiting-for-the-operator (zeros on a standby and in the other modes)."""
        values = driver_metrics(self.checkpoints) if self.checkpoints is not None else {}
        return {"kind": "tmanager", "time": time.time(),
                "gauges": {k: float(v) for k, v in values.items()}}

    def _became_active(self, fut: Any) -> None:
        parts = self._parts
        if self._stopped is None or self._stopped.is_set() or parts is None:
            return
        if fut.exception() is not None:
            # without an epoch our versions could fall below what SMs hold: a fresh start retries
            self._log.error("topology master: cannot take over: %s; exiting to be restarted", fut.exception())
            self.exit_code = 1
            self.stop()
            return
        plan, epoch = fut.result()
        self.book.adopt(plan, epoch)
        self.checkpoints = build_active(self.site, self._topo, self._packing, parts, self, epoch=epoch)
        if self.checkpoints is not None:
            self._spawn(tick_forever(self.checkpoints, self._stopped))
        parts.standing.took_over(time.time())
        self._log.info("topology master of '%s' is ACTIVE at %s:%d (plan v%d, %s)", self.topology, self.host,
                       self.port, self.book.version, self.book.run_state.value)
        self.execution_state_changed()

    def restore(self, checkpoint_id: int | None) -> tuple[bool, str]:
        """The operator's decision for a restore that waits for one (heron-py restore): a
        checkpoint id, or None for a clean start."""
        if self.checkpoints is None:
            return False, (f"topology '{self.topology}' is not effectively once or this master is not active: "
                           f"nothing to restore")
        ok, msg = self.checkpoints.operator_restore(checkpoint_id)
        self.execution_state_changed()
        return ok, msg

    def stop(self) -> None:
        if not self._begin_stop():
            return
        if self._parts is not None:
            self._parts.election.stop()
        if self._server is not None:
            self._server.close()
        if self._http is not None:
            self._http_closed = asyncio.get_running_loop().create_task(self._http.close())
        if self._parts is not None:  # not when start() failed before reading the topology
            self._parts.links.close_all("the topology master is stopping")
        # the release (if any) is queued before this: a clean stop frees the node at once
        self._worker.close(wait=True)

    def set_run_state(self, state: TopologyState) -> str:
        change = self.book.set_run_state(state)
        if change.push_plan:
            self.links.push_plan()  # writes the execution state too
        elif change.changed:
            self.execution_state_changed()
        return change.message

    def definition_switched(self, topo: TopologyDef, packing: PackingPlan) -> None:
        """A live rescale switched to a new definition and packing: the API and the web page
        read these, and they are stored again, so that what the state manager holds is what
        runs, whatever another ``update`` wrote meanwhile (one the master refused reverts only
        its own writes: heron_py/cli/lifecycle.py)."""
        self._topo, self._packing = topo, packing

        def write() -> None:  # on the state worker's thread
            self._state.set_topology(topo, self._secret)
            self._state.set_packing_plan(self.topology, packing)

        self._worker.put_latest("definition", write)

    def status(self) -> dict[str, Any]:
        parts = self._parts
        role = parts.election.role.value if parts is not None else Role.CANDIDATE.value
        tmanager = {"pid": os.getpid(), "host": self.host, "port": self.port, "http_port": self.http_port,
                    "http_scheme": self.http_scheme, "started_at": self.started_at,
                    "active_since": parts.standing.since if parts is not None else None, "role": role}
        doc = self.book.status(tmanager=tmanager, auth_failures=self.counters.auth_failures,
                               bad_frames=self.counters.bad_frames, metricsmgrs=self.metrics.endpoints())
        if self.checkpoints is not None:
            doc["checkpoints"] = driver_status(self.checkpoints)
        rescale = self.rescaler.status() if self.rescaler is not None else None
        if rescale is not None:
            doc["rescale"] = rescale
        return doc

    def execution_state_changed(self) -> None:
        """The execution state is due for a write (the parts say when)."""
        if not self.active:
            return  # only the active master speaks for the topology
        doc = self.status()
        self._worker.put_latest("executionstate", functools.partial(self._state.set_execution_state, self.topology,
                                                                    doc))


class _Handler(BaseHandler):
    """The master's peers, by role: registrations, heartbeats and effectively once's reports
    from stream managers, reports from metrics managers, commands from the CLI. What a role
    may send is its routes (built once, at start); anything else is refused by the connection
    (counted, one line, closed)."""

    def __init__(self, tm: TopologyMaster) -> None:
        self.tm = tm

    def routes(self) -> Routes:
        return Routes("tmanager", [
            on("stmgr", pb.RegisterStmgrRequest, self._register),
            on("stmgr", pb.StmgrHeartbeat, self._heartbeat),
            on("stmgr", pb.CheckpointSaved, self._checkpoint_report),
            on("stmgr", pb.StateRestored, self._checkpoint_report),
            on("stmgr", pb.RollbackRequest, self._rollback_request),
            on("stmgr", pb.Drained, self._drained),
            on_raw("metricsmgr", MsgType.METRICS_REPORT, self._metrics_report),
            on("cli", pb.AdminRequest, self._admin),
        ])

    def _admin(self, conn: Connection, req: pb.AdminRequest) -> None:
        tm = self.tm
        word, _, arg = req.command.partition(" ")
        if word == ADMIN_RESCALE and tm.active and tm.rescaler is not None:
            tm.spawn(self._rescale(conn, tm.rescaler, arg))
            return
        before = tm.book.version
        resp = tm.admin.handle(req.command)
        plans = tm.plans
        if tm.book.version == before or plans is None:
            conn.send_msg(resp)
            return

        async def answer_once_stored(version: int) -> None:
            # a run state is in effect for good only once its plan is stored (a master taking
            # over adopts the stored one): the answer waits for the write, briefly
            await plans.settled(version, timeout=ADMIN_STORE_WAIT_S)
            if conn.is_open:
                conn.send_msg(tm.admin.run_state_answer())

        tm.spawn(answer_once_stored(tm.book.version))

    async def _rescale(self, conn: Connection, rescaler: Rescaler, drain: str) -> None:
        """``rescale [DRAIN_S]``: DRAIN_S, Storm's rebalance -w, in place of the drain limit."""
        try:
            drain_s = float(drain) if drain else None
        except ValueError:
            drain_s = -1.0
        if drain_s is not None and not drain_s > 0:
            ok, message = False, f"rescale: expected a drain time in seconds > 0, found {drain!r}"
        else:
            ok, message = await rescaler.request(drain_s)
        self.tm.execution_state_changed()
        if conn.is_open:
            conn.send_msg(pb.AdminResponse(ok=ok, message=message, status_json=json.dumps(self.tm.status()).encode()))

    def _drained(self, conn: Connection, msg: pb.Drained) -> None:
        if self.tm.rescaler is not None and self.tm.active:
            self.tm.rescaler.on_drained(msg)

    def _register(self, conn: Connection, req: pb.RegisterStmgrRequest) -> None:
        tm = self.tm
        tm.links.register(conn, req)
        if tm.checkpoints is not None and tm.active and tm.links.conns.get(req.container) is conn:
            tm.checkpoints.greet(conn)
        self._instances_changed(f"stream manager {req.container} registered")

    def _heartbeat(self, conn: Connection, hb: pb.StmgrHeartbeat) -> None:
        self.tm.links.heartbeat(conn, hb)
        self._instances_changed(f"stream manager {hb.container} reported")

    def _driver(self) -> CheckpointDriver | None:
        """Effectively once's reports count only on the active master that drives checkpoints."""
        tm = self.tm
        return tm.checkpoints if tm.checkpoints is not None and tm.active else None

    def _checkpoint_report(self, conn: Connection, msg: pb.CheckpointSaved | pb.StateRestored) -> None:
        driver = self._driver()
        if driver is not None:
            driver.on_report(msg)

    def _rollback_request(self, conn: Connection, msg: pb.RollbackRequest) -> None:
        driver = self._driver()
        if driver is not None:
            driver.on_rollback_request(msg.container, msg.restore_id, msg.reason, conn.send)

    def _metrics_report(self, conn: Connection, frame: bytes) -> None:
        try:
            doc = json.loads(bytes(frame[HEADER_SIZE:]))
            if not isinstance(doc, dict):
                raise ValueError(f"expected a JSON object, found {type(doc).__name__}")
            self.tm.metrics.update(doc)
        except (ValueError, TypeError, AttributeError) as e:
            self.tm._log.warning("bad metrics report from %s: %s; dropped", conn.peer_name, e)

    def on_close(self, conn: Connection) -> None:
        if conn.identity is not None and conn.identity.role == "stmgr":
            self.tm.links.lost(conn)
            self._instances_changed(f"stream manager {conn.identity.peer_id} disconnected")

    def _instances_changed(self, cause: str) -> None:
        tm = self.tm
        if tm.rescaler is not None and tm.active:
            tm.rescaler.on_instances()
        if tm.checkpoints is not None and tm.active:
            tm.checkpoints.on_instances(tm.book.instances, cause)


def main(argv: list[str] | None = None) -> int:
    ap = statecfg.daemon_parser("topology_master")
    ap.add_argument("--standby", action="store_true",
                    help="expect to wait as a standby (any master that finds the location held waits)")
    args = ap.parse_args(argv)
    log = setup_logging("tmanager-standby" if args.standby else "tmanager")

    def make(state: StateManager) -> TopologyMaster:
        return TopologyMaster(
            topology=args.topology, secret=args.secret_file.read_bytes(), state=state, log=log,
            standby=args.standby, checkpoint_key=checkpoint_key_beside(args.secret_file, args.secret_file.read_bytes()),
            host=args.host, relaunch=_relaunch_with(args, state), tls=PeerTls.load(args.tls_file, args.topology),
            home=args.home,
            ui_cli=detached_cli(args.topology, statecfg.resolve(args, home=args.home).to_args(),
                                functools.partial(scheduler_name, state, args.topology), log))

    return run_with_state(args, log, make)


def _read_definition(state: StateManager, topology: str,
                     secret: bytes) -> tuple[TopologyDef | None, PackingPlan | None]:
    """The topology's definition (its signature checked under ``secret``) and packing plan; on
    the loop's executor (the state manager may block)."""
    return state.get_topology(topology, secret), state.get_packing_plan(topology)


def _takeover_read(state: StateManager, topology: str) -> tuple[PhysicalPlan | None, int]:
    """The stored plan and a new master epoch (plan versions never go backwards across masters);
    on the state worker."""
    return state.get_physical_plan(topology), state.next_master_epoch(topology)


def _relaunch_with(args: Any, state: StateManager) -> Relaunch:
    """Relaunches a container through the scheduler the topology was launched with."""
    from heron_py.scheduler.registry import scheduler_of

    def relaunch(container: int) -> None:
        scheduler_of(args.topology, state, args.home, statecfg.resolve(args, home=args.home)).relaunch(
            args.topology, container)

    return relaunch


