"""The topology master daemon.

It claims the topology master's location in the state manager (an ephemeral node in
ZooKeeper). If another master holds it, this one waits as a standby and claims it when it
vanishes (see election.py). The active master waits until the stream manager of every
container has registered, then builds the physical plan, stores it and pushes it to every
stream manager. A stream manager that registers again (it was restarted, with a new port)
gets a new plan version pushed to all; a master that took over continues the stored plan's
version and run state. Admin commands from the CLI (activate, deactivate, status) arrive on
the same port, from peers that proved the topology's secret.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from typing import Any

from google.protobuf.json_format import MessageToDict

from heron_py.common.daemon import DaemonBase, FatalError, setup_logging
from heron_py.common.framing import DEFAULT_MAX_FRAME, HEADER_SIZE, MsgType, encode_frame
from heron_py.common.net import BaseHandler, Connection, Counters, parse, serve
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.state import StateManager, TManagerLocation
from heron_py.state import config as statecfg
from heron_py.state.localfs import local_owner
from proto import heron_py_pb2 as pb
from topology_master.election import Election, Role, StateWorker
from topology_master.http_api import Api, MetricsView, serve_http

# exit code of a master that lost its claim to another: the executor restarts it as a standby
EXIT_STEPPED_DOWN = 3


class TopologyMaster(DaemonBase):
    def __init__(self, *, topology: str, secret: bytes, state: StateManager, log: logging.Logger,
                 host: str = "127.0.0.1", max_frame: int = DEFAULT_MAX_FRAME, standby: bool = False) -> None:
        self.topology = topology
        self.standby_requested = standby
        self.host = host
        self._secret = secret
        self._state = state
        self._log = log
        self._max_frame = max_frame
        self.counters = Counters()
        self.stmgrs: dict[int, tuple[StmgrLocation, Connection]] = {}
        self.instances: dict[int, dict[str, Any]] = {}
        self.stmgr_metrics: dict[int, dict[str, Any]] = {}
        self.pplan: PhysicalPlan | None = None
        self.run_state = TopologyState.RUNNING
        self._server: asyncio.Server | None = None
        self.started_at = time.time()
        self.active_since: float | None = None
        self.port = 0
        self.exit_code = 0
        self._worker = StateWorker(log)
        self._election: Election | None = None
        self._version = 0
        self.metrics = MetricsView()
        self.http_port = 0
        self._http: asyncio.Server | None = None

    async def start(self) -> None:
        self._begin()
        loop = asyncio.get_running_loop()
        topo, packing = await loop.run_in_executor(
            None, lambda: (self._state.get_topology(self.topology), self._state.get_packing_plan(self.topology)))
        if topo is None or packing is None:
            raise FatalError(f"topology master: topology '{self.topology}' has no definition or packing "
                             f"plan in the state manager; was it submitted?")
        self._topo, self._packing = topo, packing
        try:
            self._server = await serve(self.host, 0, lambda: _Handler(self), self._secret, role="tmanager",
                                       log=self._log, counters=self.counters, max_frame=self._max_frame)
        except OSError as e:
            raise FatalError(f"topology master: cannot listen on {self.host}: {e}") from e
        self.port = self._server.sockets[0].getsockname()[1]
        self._http = await serve_http(Api(self), self.host)
        self.http_port = self._http.sockets[0].getsockname()[1]
        self._log.info("topology master of '%s' listening on %s:%d, HTTP API and web page at http://%s:%d/%s",
                       self.topology, self.host, self.port, self.host, self.http_port,
                       " (started as standby)" if self.standby_requested else "")
        self._election = Election(state=self._state, worker=self._worker, topology=self.topology,
                                  location=self.location, loop=loop, on_role=self._on_role, log=self._log)
        self._election.start()

    def location(self) -> TManagerLocation:
        return TManagerLocation(self.host, self.port, os.getpid(), self.http_port, local_owner())

    @property
    def active(self) -> bool:
        # claimed *and* the stored plan read (active_since is set then): a master that took over
        # must not push a plan before it knows the version to continue from, or SMs that already
        # hold that version would ignore the new plan
        return self._election is not None and self._election.role is Role.ACTIVE and self.active_since is not None

    def _on_role(self, role: Role, holder: TManagerLocation | None) -> None:
        if role is Role.STANDBY:
            h = f"{holder.host}:{holder.port} pid {holder.pid}" if holder else "another master"
            self._log.info("standby: the topology master's location is held by %s; waiting for it to vanish", h)
        elif role is Role.ACTIVE:
            self._worker.submit(self._state.get_physical_plan, self.topology).add_done_callback(
                lambda f: self._loop_call(self._became_active, f))
        elif role is Role.STOPPED:
            self._log.error("another topology master (%s) holds the location after our ZooKeeper session "
                            "came back; stepping down", holder.to_dict() if holder else "?")
            self.exit_code = EXIT_STEPPED_DOWN
            self.stop()

    def _loop_call(self, fn: Any, *args: Any) -> None:
        loop = self._server.get_loop() if self._server is not None else None
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)

    def _became_active(self, fut: Any) -> None:
        if self._stopped is None or self._stopped.is_set():
            return
        old = fut.result() if fut.exception() is None else None
        if old is not None and old.version > self._version:
            # a master that took over keeps the run state and counts plan versions onward
            self.run_state = old.state
            self._version = old.version
        self.active_since = time.time()
        self._log.info("topology master of '%s' is ACTIVE at %s:%d (plan v%d, %s)", self.topology, self.host,
                       self.port, self._version, self.run_state.value)
        self._write_execution_state()

    def stop(self) -> None:
        if not self._begin_stop():
            return
        if self._election is not None:
            self._election.stop()
        if self._server is not None:
            self._server.close()
        if self._http is not None:
            self._http.close()
        for _, conn in self.stmgrs.values():
            conn.close()
        # the release (if any) is queued before this: a clean stop frees the node at once
        self._worker.close(wait=True)

    # --- registration and plans ---
    def register_stmgr(self, conn: Connection, req: pb.RegisterStmgrRequest) -> None:
        if not self.active:
            # an SM that read a stale location: it will find the active master through the state
            conn.send_msg(MsgType.REGISTER_STMGR_RESPONSE, pb.RegisterStmgrResponse(
                ok=False, error=f"topology master pid {os.getpid()} is a standby, not the active master"))
            conn.close()
            return
        if not 0 <= req.container < self._packing.num_containers:
            conn.send_msg(MsgType.REGISTER_STMGR_RESPONSE, pb.RegisterStmgrResponse(
                ok=False, error=f"container {req.container} is not in the packing plan "
                f"(containers 0..{self._packing.num_containers - 1})"))
            conn.close()
            return
        old = self.stmgrs.get(req.container)
        if old is not None and old[1] is not conn:
            old[1].close()
        loc = StmgrLocation(req.container, req.host, req.port, req.pid)
        self.stmgrs[req.container] = (loc, conn)
        conn.context = req.container
        conn.send_msg(MsgType.REGISTER_STMGR_RESPONSE, pb.RegisterStmgrResponse(ok=True))
        self._log.info("stream manager %d registered (%s:%d pid %d)", req.container, req.host, req.port, req.pid)
        self._update_instances(req.container, req.instances)
        if len(self.stmgrs) == self._packing.num_containers:
            self._push_plan()

    def stmgr_lost(self, conn: Connection) -> None:
        c = conn.context
        if isinstance(c, int) and c in self.stmgrs and self.stmgrs[c][1] is conn:
            del self.stmgrs[c]
            for info in self.instances.values():
                if info.get("container") == c:
                    info["ready"] = False
            self._log.warning("stream manager %d disconnected", c)
            self._write_execution_state()

    def _update_instances(self, container: int, infos: Any) -> None:
        for t in self._packing.tasks_in(container):
            self.instances[t.task_id] = {"component": t.component, "container": container,
                                         "pid": 0, "ready": False}
        for i in infos:
            self.instances[i.task_id] = {**self.instances.get(i.task_id, {}), "pid": i.pid, "ready": i.ready}
        self._write_execution_state()

    def heartbeat(self, hb: pb.StmgrHeartbeat) -> None:
        if hb.HasField("metrics"):
            self.stmgr_metrics[hb.container] = MessageToDict(hb.metrics, preserving_proto_field_name=True)
        self._update_instances(hb.container, hb.instances)

    def _push_plan(self) -> None:
        self._version += 1
        self.pplan = PhysicalPlan(
            topology=self._topo,
            packing=self._packing,
            stmgrs=tuple(loc for loc, _ in sorted(self.stmgrs.values(), key=lambda x: x[0].container)),
            state=self.run_state,
            version=self._version,
        )
        plan = self.pplan
        self._worker.put_latest("pplan", lambda: self._state.set_physical_plan(self.topology, plan))
        raw = json.dumps(self.pplan.to_dict()).encode()
        frame = encode_frame(MsgType.NEW_PHYSICAL_PLAN, pb.NewPhysicalPlan(pplan_json=raw).SerializeToString())
        for _, conn in self.stmgrs.values():
            conn.send(frame)
        self._log.info("pushed physical plan v%d (%s) to %d stream managers", self._version,
                       self.run_state.value, len(self.stmgrs))
        self._write_execution_state()

    def set_run_state(self, state: TopologyState) -> str:
        if self.run_state is state:
            return f"topology '{self.topology}' is already {state.value}"
        self.run_state = state
        if self.pplan is not None and len(self.stmgrs) == self._packing.num_containers:
            self._push_plan()
        else:
            self._write_execution_state()
        return f"topology '{self.topology}' is now {state.value}"

    def status(self) -> dict[str, Any]:
        return {
            "topology": self.topology,
            "state": self.run_state.value,
            "pplan_version": self.pplan.version if self.pplan is not None else 0,
            "tmanager": {"pid": os.getpid(), "host": self.host, "port": self.port, "http_port": self.http_port,
                         "started_at": self.started_at,
                         "active_since": self.active_since,
                         "role": self._election.role.value if self._election else Role.CANDIDATE.value},
            "stmgrs": {str(c): loc.to_dict() for c, (loc, _) in sorted(self.stmgrs.items())},
            "instances": {str(t): i for t, i in sorted(self.instances.items())},
            "auth_failures": self.counters.auth_failures + sum(
                int(m.get("auth_failures", 0)) for m in self.stmgr_metrics.values()),
            "bad_frames": self.counters.bad_frames + sum(
                int(m.get("bad_frames", 0)) for m in self.stmgr_metrics.values()),
            "stmgr_metrics": {str(c): m for c, m in sorted(self.stmgr_metrics.items())},
            "metricsmgrs": self.metrics.endpoints(),
        }

    def _write_execution_state(self) -> None:
        if not self.active:
            return  # only the active master speaks for the topology
        doc = self.status()
        self._worker.put_latest("executionstate", lambda: self._state.set_execution_state(self.topology, doc))


class _Handler(BaseHandler):
    def __init__(self, tm: TopologyMaster) -> None:
        self.tm = tm

    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        tm = self.tm
        ident = conn.identity
        assert ident is not None
        if msg_type == MsgType.REGISTER_STMGR_REQUEST and ident.role == "stmgr":
            req = pb.RegisterStmgrRequest()
            parse(req, frame)
            tm.register_stmgr(conn, req)
        elif msg_type == MsgType.STMGR_HEARTBEAT and ident.role == "stmgr":
            hb = pb.StmgrHeartbeat()
            parse(hb, frame)
            tm.heartbeat(hb)
        elif msg_type == MsgType.METRICS_REPORT and ident.role == "metricsmgr":
            try:
                doc = json.loads(bytes(frame[HEADER_SIZE:]))
                if not isinstance(doc, dict):
                    raise ValueError(f"expected a JSON object, found {type(doc).__name__}")
                tm.metrics.update(doc)
            except (ValueError, TypeError, AttributeError) as e:
                tm._log.warning("bad metrics report from %s: %s; dropped", conn.peer_name, e)
        elif msg_type == MsgType.ADMIN_REQUEST and ident.role == "cli":
            req2 = pb.AdminRequest()
            parse(req2, frame)
            resp = self._admin(req2.command)
            conn.send_msg(MsgType.ADMIN_RESPONSE, resp)
        else:
            tm._log.warning("unexpected message type %d from %s (%s); dropping the connection",
                            msg_type, conn.peer_name, ident.role)
            conn.close()

    def _admin(self, command: str) -> pb.AdminResponse:
        tm = self.tm
        if not tm.active and command != "status":
            return pb.AdminResponse(ok=False, message=f"topology master pid {os.getpid()} is a standby; "
                                    f"send {command} to the active master (its location is in the state manager)")
        if command == "activate":
            return pb.AdminResponse(ok=True, message=tm.set_run_state(TopologyState.RUNNING))
        if command == "deactivate":
            return pb.AdminResponse(ok=True, message=tm.set_run_state(TopologyState.PAUSED))
        if command == "status":
            return pb.AdminResponse(ok=True, status_json=json.dumps(tm.status()).encode())
        return pb.AdminResponse(ok=False, message=f"unknown admin command {command!r}; expected one of "
                                "activate, deactivate, status")

    def on_close(self, conn: Connection) -> None:
        if conn.identity is not None and conn.identity.role == "stmgr":
            self.tm.stmgr_lost(conn)


def main(argv: list[str] | None = None) -> int:
    ap = statecfg.daemon_parser("topology_master")
    ap.add_argument("--standby", action="store_true",
                    help="expect to wait as a standby (any master that finds the location held waits)")
    args = ap.parse_args(argv)
    log = setup_logging("tmanager-standby" if args.standby else "tmanager")
    return statecfg.run_with_state(args, log, lambda state: TopologyMaster(
        topology=args.topology, secret=args.secret_file.read_bytes(), state=state, log=log, standby=args.standby))


