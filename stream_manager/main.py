"""The stream manager daemon.

One listening port serves both its local instances and the other stream managers of the
clique; the handshake's role says which a connection is. For sending to another container
it keeps one outbound connection per peer. Tuple batches are routed on their 12-byte
header and forwarded as the same bytes: the stream manager never unpickles a tuple.
"""

from __future__ import annotations

import asyncio
import collections
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from heron_py.common.config import METRICS_INTERVAL
from heron_py.common.daemon import DaemonBase, FatalError, setup_logging, write_atomically
from heron_py.common.framing import (
    ACK_ACK,
    ACK_FAIL,
    ACK_INIT,
    ACK_RECORD,
    BODY_OFFSET,
    DEFAULT_MAX_FRAME,
    RESULT_ACKED,
    RESULT_FAILED,
    RESULT_RECORD,
    RESULT_TIMED_OUT,
    MsgType,
    batch_count,
    batch_dest,
    encode_batch_frame,
    encode_frame,
)
from heron_py.common.net import BaseHandler, Connection, Counters, connect, parse, serve
from heron_py.common.process import process_gauges
from heron_py.common.tmlink import LocationFollower
from heron_py.planner.model import ComponentKind, PhysicalPlan
from heron_py.state import StateManager
from heron_py.state import config as statecfg
from proto import heron_py_pb2 as pb
from stream_manager.acking import Outcome, Resolved, XorTracker
from stream_manager.backpressure import Action, BackpressureState

HEARTBEAT_S = 1.0
DROP_KEY = "topology.droptuples.upon.backpressure"
HIGH_WATERMARK_KEY = "heron.streammgr.network.backpressure.highwatermark.mb"
LOW_WATERMARK_KEY = "heron.streammgr.network.backpressure.lowwatermark.mb"
DEFAULT_HIGH_MB = 100.0
DEFAULT_LOW_MB = 50.0
# frames held for a destination that is not connected yet (start-up, restart); beyond
# this the oldest are dropped and counted, so memory stays bounded
MAX_HELD_FRAMES = 4096
MB = 1024 * 1024


def watermarks(config: Mapping[str, Any]) -> tuple[int, int]:
    """(high, low) in bytes from the topology config; one clear error for a bad pair."""
    def mb(key: str, default: float) -> float:
        raw = config.get(key)
        try:
            v = float(raw) if raw not in (None, "") else default
        except (TypeError, ValueError):
            v = -1.0
        if v <= 0:
            raise FatalError(f"config {key}: expected a number of MB > 0, found {raw!r}")
        return v

    high, low = mb(HIGH_WATERMARK_KEY, DEFAULT_HIGH_MB), mb(LOW_WATERMARK_KEY, DEFAULT_LOW_MB)
    if low >= high:
        raise FatalError(f"config {LOW_WATERMARK_KEY} ({low:g}) must be below {HIGH_WATERMARK_KEY} ({high:g})")
    return int(high * MB), int(low * MB)


class StreamManager(DaemonBase):
    def __init__(self, *, topology: str, container: int, secret: bytes, state: StateManager,
                 port_file: Path, log: logging.Logger, host: str = "127.0.0.1",
                 max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.topology = topology
        self.container = container
        self.host = host
        self.port = 0
        self._secret = secret
        self._state = state
        self._port_file = port_file
        self._log = log
        self._max_frame = max_frame
        self.counters = Counters()
        self.pplan: PhysicalPlan | None = None
        self.instances: dict[int, Connection] = {}
        self.ready: dict[int, int] = {}  # task id -> pid, instances that finished initialize
        self.pids: dict[int, int] = {}
        self.peers_out: dict[int, Connection] = {}
        self._connecting: set[int] = set()
        self.held: dict[tuple[str, int], collections.deque[bytes]] = {}
        self.dropped_frames = 0
        self.tm: Connection | None = None
        self._server: asyncio.Server | None = None
        self._local_tasks: frozenset[int] = frozenset()
        self._local_spouts: frozenset[int] = frozenset()
        self._container_of: dict[int, int] = {}
        self.bp = BackpressureState(clock=time.monotonic)
        self.tracker = XorTracker(buckets=3)
        self.instance_metrics: dict[int, pb.InstanceMetrics] = {}
        self.drop_on_backpressure = False
        self.dropped_tuples = 0
        self.message_timeout_s = 30.0
        self.acks_routed = 0
        self.high = int(DEFAULT_HIGH_MB * MB)
        self.low = int(DEFAULT_LOW_MB * MB)
        self.tuples_out: dict[str, int] = {}  # per outbound connection, for the metrics manager
        self.metrics_interval = 10.0

    # --- lifecycle ---
    async def start(self) -> None:
        self._begin()
        try:
            self._server = await serve(self.host, 0, lambda: _Inbound(self), self._secret, role="stmgr",
                                       log=self._log, counters=self.counters, max_frame=self._max_frame)
        except OSError as e:
            raise FatalError(f"stream manager of container {self.container}: cannot listen on "
                             f"{self.host}: {e}") from e
        self.port = self._server.sockets[0].getsockname()[1]
        write_atomically(self._port_file, str(self.port))
        self._log.info("stream manager of container %d listening on %s:%d", self.container, self.host, self.port)
        self._spawn(self._tm_loop())
        self._spawn(self._rotate_loop())
        self._spawn(self._mm_loop())

    def stop(self) -> None:
        if not self._begin_stop():
            return
        if self._server is not None:
            self._server.close()
        for c in [*self.instances.values(), *self.peers_out.values()]:
            c.close()
        if self.tm is not None:
            self.tm.close()

    # --- topology master ---
    async def _tm_loop(self) -> None:
        """Finds the active topology master through the state manager's watch on its location
        (no polling of the store) and stays registered with it: on a lost connection or a new
        location (a standby took over) it connects again and re-registers."""
        loop = asyncio.get_running_loop()
        follow = LocationFollower(self._state, self.topology)
        await follow.start()
        handler = _TmHandler(self)
        try:
            while True:
                loc = follow.current
                if loc is None:
                    await follow.wait_change()
                    continue
                try:
                    conn = await connect(loc.host, loc.port, handler, self._secret, role="stmgr",
                                         peer_id=str(self.container), log=self._log, max_frame=self._max_frame)
                except (TimeoutError, OSError, ConnectionError) as e:
                    self._log.info("topology master at %s:%d not reachable (%s); waiting for a new location",
                                   loc.host, loc.port, e)
                    # a dead master's node stays until its session expires: retry now and then
                    await follow.wait_change(0.5)
                    continue
                self.tm = conn
                closed: asyncio.Future[None] = loop.create_future()
                conn.context = closed
                conn.send_msg(MsgType.REGISTER_STMGR_REQUEST, pb.RegisterStmgrRequest(
                    container=self.container, host=self.host, port=self.port, pid=os.getpid(),
                    instances=self._instance_infos()))
                self._log.info("registered with topology master at %s:%d (pid %d)", loc.host, loc.port, loc.pid)
                while not closed.done():
                    if follow.moved_from(loc):
                        self._log.info("topology master moved; reconnecting")
                        conn.close()
                        break
                    try:
                        await asyncio.wait_for(asyncio.shield(closed), HEARTBEAT_S)
                    except TimeoutError:
                        conn.send_msg(MsgType.STMGR_HEARTBEAT, pb.StmgrHeartbeat(
                            container=self.container, instances=self._instance_infos(), metrics=self._metrics()))
                self.tm = None
                self._log.warning("connection to topology master lost; reconnecting")
                await asyncio.sleep(0.2)
        finally:
            follow.stop()

    def metrics_report(self) -> dict[str, Any]:
        """The JSON report for the metrics manager (metrics_manager/store.py)."""
        counters: dict[str, float] = {
            "__time_spent_back_pressure_ms": int(self.bp.time_in_backpressure() * 1000),
            "__dropped-tuples": self.dropped_tuples}
        conns = {**{f"task {t}": c for t, c in self.instances.items()},
                 **{f"stmgr {p}": c for p, c in self.peers_out.items()}}
        for key, c in conns.items():
            counters[f"__bytes-out/{key}"] = c.bytes_out
            counters[f"__bytes-in/{key}"] = c.bytes_in
        for key, n in self.tuples_out.items():
            counters[f"__tuples-out/{key}"] = n
        for comp, ms in self._bp_by_component().items():
            counters[f"__time_spent_back_pressure_by_compid/{comp}"] = ms
        gauges: dict[str, float] = {"__in-backpressure": int(self.bp.local),
                                    "__spouts-paused": int(self._spouts_held()),
                                    "__pending-roots": self.tracker.pending}
        for key, c in conns.items():
            gauges[f"__buffered-bytes/{key}"] = c.write_buffer_size()
        return {"kind": "stmgr", "container": self.container, "time": time.time(), "counters": counters,
                "gauges": gauges, "process": process_gauges()}

    async def _mm_loop(self) -> None:
        """Reports to the container's metrics manager on a connection of its own."""
        mm_file = self._port_file.parent / "metricsmgr.json"
        while True:
            try:
                port = int(json.loads(mm_file.read_text())["port"])
                conn = await connect(self.host, port, BaseHandler(), self._secret, role="stmgr",
                                     peer_id=str(self.container), log=self._log, max_frame=self._max_frame)
            except (TimeoutError, OSError, ValueError, KeyError, ConnectionError):
                await asyncio.sleep(1.0)
                continue
            while conn.is_open:
                if self.metrics_interval > 0:
                    conn.send(encode_frame(MsgType.METRICS_REPORT, json.dumps(self.metrics_report()).encode()))
                await asyncio.sleep(self.metrics_interval or 1.0)
            conn.close()

    def _metrics(self) -> pb.StmgrMetrics:
        buffered = {f"task {t}": c.write_buffer_size() for t, c in self.instances.items()}
        buffered.update({f"stmgr {p}": c.write_buffer_size() for p, c in self.peers_out.items()})
        cause = ", ".join(sorted(self.bp.slow)) or ", ".join(f"stmgr {c}" for c in sorted(self.bp.peers))
        return pb.StmgrMetrics(
            in_backpressure=self.bp.local, spouts_paused=self._spouts_held(),
            time_spent_back_pressure_ms=int(self.bp.time_in_backpressure() * 1000),
            backpressure_episodes=self.bp.episodes, backpressure_cause=cause,
            dropped_tuples=self.dropped_tuples, buffered_bytes=buffered,
            instances=[self.instance_metrics[t] for t in sorted(self.instance_metrics)],
            pending_roots=self.tracker.pending, auth_failures=self.counters.auth_failures,
            bad_frames=self.counters.bad_frames, time_spent_back_pressure_by_compid_ms=self._bp_by_component())

    def _bp_by_component(self) -> dict[str, int]:
        comp = {t.task_id: t.component for t in self.pplan.packing.tasks} if self.pplan else {}
        out: dict[str, int] = {}
        for key, secs in self.bp.time_by_cause().items():
            kind, _, ident = key.partition(" ")
            name = comp.get(int(ident), key) if kind == "task" else key
            out[name] = out.get(name, 0) + int(secs * 1000)
        return out

    def _instance_infos(self) -> list[pb.InstanceInfo]:
        return [pb.InstanceInfo(task_id=t, pid=self.pids.get(t, 0), ready=t in self.ready)
                for t in sorted(self.instances)]

    def on_new_pplan(self, raw: bytes) -> None:
        plan = PhysicalPlan.from_dict(json.loads(raw))
        if self.pplan is not None and plan.version <= self.pplan.version:
            return
        self.pplan = plan
        self._container_of = {t.task_id: t.container for t in plan.packing.tasks}
        self._local_tasks = frozenset(t for t, c in self._container_of.items() if c == self.container)
        spouts = {c.name for c in plan.topology.components if c.kind is ComponentKind.SPOUT}
        self._local_spouts = frozenset(t.task_id for t in plan.packing.tasks
                                       if t.component in spouts and t.task_id in self._local_tasks)
        self.drop_on_backpressure = str(plan.topology.config.get(DROP_KEY, "false")).lower() == "true"
        try:
            self.metrics_interval = max(0.0, float(plan.topology.config.get(METRICS_INTERVAL, 10.0)))
        except (TypeError, ValueError):
            self._log.error("config %s: expected seconds, found %r; keeping %g", METRICS_INTERVAL,
                            plan.topology.config.get(METRICS_INTERVAL), self.metrics_interval)
        raw_timeout = plan.topology.config.get("topology.message.timeout.secs")
        try:
            self.message_timeout_s = float(raw_timeout) if raw_timeout else 30.0
        except (TypeError, ValueError):
            self._log.error("config topology.message.timeout.secs: expected seconds, found %r; keeping %g",
                            raw_timeout, self.message_timeout_s)
        try:
            self.high, self.low = watermarks(plan.topology.config)
        except FatalError as e:
            self._log.error("%s; keeping %d/%d MB", e, self.high // MB, self.low // MB)
        for conn in [*self.instances.values(), *self.peers_out.values()]:
            conn.set_write_limits(self.high, self.low)
        if self._spouts_held():
            for t in self._local_spouts:
                spout_conn = self.instances.get(t)
                if spout_conn is not None:
                    spout_conn.pause_reading()
        self._log.info("physical plan v%d: state %s, %d tasks, %d containers", plan.version, plan.state.value,
                       len(plan.packing.tasks), plan.packing.num_containers)
        # a peer whose address changed (restarted) gets a fresh connection
        for s in plan.stmgrs:
            peer = self.peers_out.get(s.container)
            if peer is not None and peer.context != (s.host, s.port):
                peer.close()
                del self.peers_out[s.container]
        for s in plan.stmgrs:
            if s.container != self.container:
                self._ensure_peer(s.container)
        msg = encode_frame(MsgType.NEW_PHYSICAL_PLAN, pb.NewPhysicalPlan(pplan_json=raw).SerializeToString())
        for conn in self.instances.values():
            conn.send(msg)

    # --- clique ---
    def _ensure_peer(self, container: int) -> None:
        if container in self.peers_out or container in self._connecting:
            return
        self._connecting.add(container)
        self._tasks.append(asyncio.ensure_future(self._connect_peer(container)))

    async def _connect_peer(self, container: int) -> None:
        try:
            while self.pplan is not None:
                loc = next((s for s in self.pplan.stmgrs if s.container == container), None)
                if loc is None:
                    return
                try:
                    conn = await connect(loc.host, loc.port, _PeerOut(self, container), self._secret,
                                         role="stmgr", peer_id=str(self.container), log=self._log,
                                         max_frame=self._max_frame)
                except (TimeoutError, OSError, ConnectionError) as e:
                    self._log.info("stream manager %d at %s:%d not reachable (%s); retrying",
                                   container, loc.host, loc.port, e)
                    await asyncio.sleep(0.3)
                    continue
                conn.context = (loc.host, loc.port)
                conn.set_write_limits(self.high, self.low)
                conn.send_msg(MsgType.STMGR_HELLO, pb.StmgrHello(container=self.container))
                if self.bp.local:
                    conn.send_msg(MsgType.BACKPRESSURE, pb.BackPressure(
                        container=self.container, start=True, cause=", ".join(sorted(self.bp.slow))))
                self.peers_out[container] = conn
                self._log.info("connected to stream manager %d at %s:%d", container, loc.host, loc.port)
                self._release(("peer", container), conn)
                return
        finally:
            self._connecting.discard(container)

    def peer_lost(self, container: int, conn: Connection) -> None:
        self.apply(self.bp.connection_low(f"stmgr {container}"))
        if self.peers_out.get(container) is conn:
            del self.peers_out[container]
            self._log.warning("lost connection to stream manager %d; reconnecting", container)
            if self._stopped is not None and not self._stopped.is_set():
                self._ensure_peer(container)

    # --- backpressure ---
    def on_writing(self, key: str, paused: bool) -> None:
        if paused:
            self._log.info("connection to %s above the high watermark (%d MB)", key, self.high // MB)
            self.apply(self.bp.connection_high(key))
        else:
            self.apply(self.bp.connection_low(key))

    def on_peer_backpressure(self, msg: pb.BackPressure) -> None:
        if msg.start:
            self._log.info("stream manager %d is in backpressure (%s)", msg.container, msg.cause)
            self.apply(self.bp.peer_start(msg.container))
        else:
            self._log.info("stream manager %d left backpressure", msg.container)
            self.apply(self.bp.peer_stop(msg.container))

    def _spouts_held(self) -> bool:
        """Whether local spouts must not be read now (never in droptuples mode)."""
        return self.bp.spouts_paused and not self.drop_on_backpressure

    def apply(self, actions: list[Action]) -> None:
        for a in actions:
            if a is Action.PAUSE_SPOUTS or a is Action.RESUME_SPOUTS:
                if self.drop_on_backpressure:
                    continue  # spouts keep going; route() drops what a slow connection cannot take
                for t in self._local_spouts:
                    spout_conn = self.instances.get(t)
                    if spout_conn is not None:
                        spout_conn.pause_reading() if a is Action.PAUSE_SPOUTS else spout_conn.resume_reading()
                self._log.info("%s local spouts", "paused" if a is Action.PAUSE_SPOUTS else "resumed")
            else:
                start = a is Action.BROADCAST_START
                msg = encode_frame(MsgType.BACKPRESSURE, pb.BackPressure(
                    container=self.container, start=start, cause=", ".join(sorted(self.bp.slow))).SerializeToString())
                for conn in self.peers_out.values():
                    conn.send(msg)
                self._log.info("broadcast %s to %d peers", "StartBackPressure" if start else "StopBackPressure",
                               len(self.peers_out))

    # --- acking ---
    async def _rotate_loop(self) -> None:
        # 3 buckets rotated every T/2: a root times out between T and 1.5 T after it was seen
        while True:
            await asyncio.sleep(self.message_timeout_s / 2)
            self._send_results(self.tracker.rotate())

    def on_ack_batch(self, frame: bytes) -> None:
        """Records for one of our spout tasks: update the XOR state, report resolved roots."""
        spout = batch_dest(frame)
        tracker = self.tracker
        resolved = []
        for kind, root, value in ACK_RECORD.iter_unpack(memoryview(frame)[BODY_OFFSET:]):
            if kind in (ACK_INIT, ACK_ACK):
                r = tracker.update(spout, root, value)
            elif kind == ACK_FAIL:
                r = tracker.fail(spout, root)
            else:
                self._log.warning("ack record of unknown kind %d for task %d; ignored", kind, spout)
                continue
            if r is not None:
                resolved.append(r)
        self._send_results(resolved)

    _OUTCOME = {Outcome.ACKED: RESULT_ACKED, Outcome.FAILED: RESULT_FAILED, Outcome.TIMED_OUT: RESULT_TIMED_OUT}

    def _send_results(self, resolved: list[Resolved]) -> None:
        by_task: dict[int, list[bytes]] = {}
        for r in resolved:
            by_task.setdefault(r.spout_task, []).append(RESULT_RECORD.pack(self._OUTCOME[r.outcome], r.root))
        for task, recs in by_task.items():
            frame = encode_batch_frame(task, 0, b"".join(recs), MsgType.ACK_RESULT, len(recs))
            conn = self.instances.get(task)
            if conn is not None:
                conn.send(frame)
            else:
                self._hold(("task", task), frame)

    # --- routing ---
    def route(self, frame: bytes) -> None:
        dest = batch_dest(frame)
        if frame[5] == MsgType.ACK_BATCH and dest in self._local_tasks:
            self.on_ack_batch(frame)
            return
        if dest in self._local_tasks:
            conn = self.instances.get(dest)
            if conn is not None:
                if conn.writing_paused and self.drop_on_backpressure and frame[5] == MsgType.TUPLE_BATCH:
                    self.dropped_tuples += batch_count(frame)
                    return
                conn.send(frame)
                key = f"task {dest}"
                self.tuples_out[key] = self.tuples_out.get(key, 0) + batch_count(frame)
            else:
                self._hold(("task", dest), frame)
            return
        container = self._container_of.get(dest)
        if container is None:
            self.dropped_frames += 1
            self._log.warning("dropping a batch for unknown task %d", dest)
            return
        conn = self.peers_out.get(container)
        if conn is not None:
            if conn.writing_paused and self.drop_on_backpressure and frame[5] == MsgType.TUPLE_BATCH:
                self.dropped_tuples += batch_count(frame)
                return
            conn.send(frame)
            key = f"stmgr {container}"
            self.tuples_out[key] = self.tuples_out.get(key, 0) + batch_count(frame)
        else:
            self._hold(("peer", container), frame)

    def _hold(self, key: tuple[str, int], frame: bytes) -> None:
        q = self.held.get(key)
        if q is None:
            q = self.held[key] = collections.deque()
        if len(q) >= MAX_HELD_FRAMES:
            old = q.popleft()
            self.dropped_frames += 1
            self.dropped_tuples += batch_count(old)
            self._log.warning("dropped a held batch of %d for %s %d (nobody to deliver to)", batch_count(old), *key)
        q.append(frame)

    def _release(self, key: tuple[str, int], conn: Connection) -> None:
        q = self.held.pop(key, None)
        if q:
            assert conn.transport is not None
            conn.transport.writelines(q)

    # --- instances ---
    def register_instance(self, conn: Connection, req: pb.RegisterInstanceRequest) -> None:
        old = self.instances.get(req.task_id)
        if old is not None and old is not conn:
            old.close()
        self.instances[req.task_id] = conn
        conn.set_write_limits(self.high, self.low)
        if req.task_id in self._local_spouts and self._spouts_held():
            conn.pause_reading()
        self.pids[req.task_id] = req.pid
        self.ready.pop(req.task_id, None)
        conn.context = req.task_id
        raw = json.dumps(self.pplan.to_dict()).encode() if self.pplan is not None else b""
        conn.send_msg(MsgType.REGISTER_INSTANCE_RESPONSE, pb.RegisterInstanceResponse(ok=True, pplan_json=raw))
        self._release(("task", req.task_id), conn)
        self._log.info("instance task %d (%s, pid %d) registered", req.task_id, req.component, req.pid)

    def instance_ready(self, task_id: int, pid: int) -> None:
        self.ready[task_id] = pid
        if self.tm is not None:
            self.tm.send_msg(MsgType.STMGR_HEARTBEAT, pb.StmgrHeartbeat(
                container=self.container, instances=self._instance_infos()))

    def instance_lost(self, conn: Connection) -> None:
        task = conn.context
        if isinstance(task, int) and self.instances.get(task) is conn:
            self.apply(self.bp.connection_low(f"task {task}"))
            del self.instances[task]
            self.ready.pop(task, None)
            self._log.warning("instance task %d disconnected", task)


class _Inbound(BaseHandler):
    """Handler of an accepted connection: a local instance or a peer stream manager."""

    def __init__(self, sm: StreamManager) -> None:
        self.sm = sm

    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        sm = self.sm
        if msg_type == MsgType.TUPLE_BATCH or msg_type == MsgType.ACK_BATCH:
            sm.route(frame)
            return
        ident = conn.identity
        assert ident is not None
        if msg_type == MsgType.REGISTER_INSTANCE_REQUEST and ident.role == "instance":
            req = pb.RegisterInstanceRequest()
            parse(req, frame)
            if str(req.task_id) != ident.peer_id or (req.task_id not in sm._local_tasks and sm.pplan is not None):
                conn.send_msg(MsgType.REGISTER_INSTANCE_RESPONSE, pb.RegisterInstanceResponse(
                    ok=False, error=f"task {req.task_id} does not run in container {sm.container}"))
                conn.close()
                return
            sm.register_instance(conn, req)
        elif msg_type == MsgType.INSTANCE_METRICS and ident.role == "instance":
            m = pb.InstanceMetrics()
            parse(m, frame)
            sm.instance_metrics[m.task_id] = m
        elif msg_type == MsgType.INSTANCE_READY and ident.role == "instance":
            msg = pb.InstanceReady()
            parse(msg, frame)
            sm.instance_ready(msg.task_id, msg.pid)
        elif msg_type == MsgType.STMGR_HELLO and ident.role == "stmgr":
            pass
        elif msg_type == MsgType.BACKPRESSURE and ident.role == "stmgr":
            bp = pb.BackPressure()
            parse(bp, frame)
            sm.on_peer_backpressure(bp)
        else:
            sm._log.warning("unexpected message type %d from %s (%s); dropping the connection",
                            msg_type, conn.peer_name, ident.role)
            conn.close()

    def on_writing(self, conn: Connection, paused: bool) -> None:
        if isinstance(conn.context, int):
            self.sm.on_writing(f"task {conn.context}", paused)

    def on_close(self, conn: Connection) -> None:
        ident = conn.identity
        if ident is not None and ident.role == "stmgr":
            # a peer that dies while in backpressure must not leave us paused
            try:
                peer = int(ident.peer_id)
            except ValueError:
                return
            if peer in self.sm.bp.peers:
                self.sm.apply(self.sm.bp.peer_stop(peer))
            return
        self.sm.instance_lost(conn)


class _PeerOut(BaseHandler):
    def __init__(self, sm: StreamManager, container: int) -> None:
        self.sm = sm
        self.container = container

    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        if msg_type in (MsgType.TUPLE_BATCH, MsgType.ACK_BATCH):  # peers send on their own connections
            self.sm.route(frame)

    def on_writing(self, conn: Connection, paused: bool) -> None:
        self.sm.on_writing(f"stmgr {self.container}", paused)

    def on_close(self, conn: Connection) -> None:
        self.sm.peer_lost(self.container, conn)


class _TmHandler(BaseHandler):
    def __init__(self, sm: StreamManager) -> None:
        self.sm = sm

    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        if msg_type == MsgType.NEW_PHYSICAL_PLAN:
            msg = pb.NewPhysicalPlan()
            parse(msg, frame)
            self.sm.on_new_pplan(msg.pplan_json)
        elif msg_type == MsgType.REGISTER_STMGR_RESPONSE:
            resp = pb.RegisterStmgrResponse()
            parse(resp, frame)
            if not resp.ok:
                self.sm._log.error("topology master refused registration: %s", resp.error)

    def on_close(self, conn: Connection) -> None:
        fut = conn.context
        if isinstance(fut, asyncio.Future) and not fut.done():
            fut.set_result(None)


def main(argv: list[str] | None = None) -> int:
    ap = statecfg.daemon_parser("stream_manager")
    ap.add_argument("--container", type=int, required=True)
    ap.add_argument("--port-file", type=Path, required=True)
    args = ap.parse_args(argv)
    log = setup_logging(f"stmgr[{args.container}]")
    return statecfg.run_with_state(args, log, lambda state: StreamManager(
        topology=args.topology, container=args.container, secret=args.secret_file.read_bytes(), state=state,
        port_file=args.port_file, log=log))
