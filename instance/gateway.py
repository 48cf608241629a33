"""The gateway thread: owns the sockets of an instance process, never runs user code.

Inbound frames go to the execution thread through a bounded queue (``Inbox``: when it is
full the gateway stops reading the socket, TCP then pushes back to the stream manager, and a
short timer retries). Outbound frames come from the execution thread through another bounded
queue; the execution thread wakes us with ``call_soon_threadsafe`` once per flush. Metrics
reports go to the container's metrics manager on a connection of their own (``MetricsLink``, in
heron_py/common/metrics_link.py, on the gateway's loop), so they never wait behind tuples.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heron_py.common.alive import beat
from heron_py.common.container_layout import ContainerLayout
from heron_py.common.daemon import new_event_loop
from heron_py.common.framing import MsgType
from heron_py.common.handshake import PeerIdentity
from heron_py.common.metrics_link import MetricsLink
from heron_py.common.net import (
    DEFAULT_LIVENESS,
    Connection,
    Liveness,
    Routed,
    Routes,
    connect,
    connect_unix,
    on,
    on_raw,
)
from heron_py.common.reconnect import Unreachable, run_link
from instance.queues import Inbox, InItem, InKind, QueueBytes, WireMark
from proto import heron_py_pb2 as pb

# the gateway's own socket buffer stays small: the bounded outbound queue is the buffer
WRITE_HIGH = 1 << 20
WRITE_LOW = 256 << 10


def _routes(gw: Gateway) -> Routes:
    """What our stream manager may send us; anything else is refused by the connection
    (counted, one line, closed). Batches, acks and markers go to the inbox as they came."""
    deliver = gw.inbox.deliver
    return Routes("instance", [
        on_raw("stmgr", MsgType.TUPLE_BATCH, lambda conn, frame: deliver((InKind.BATCH, frame))),
        on_raw("stmgr", MsgType.ACK_RESULT, lambda conn, frame: deliver((InKind.ACKS, frame))),
        on_raw("stmgr", MsgType.CKPT_MARKER, lambda conn, frame: deliver((InKind.MARKER, frame))),
        # the master's effectively-once commands, through our stream manager
        on("stmgr", pb.StartCheckpoint, lambda conn, m: deliver((InKind.CKPT_START, m.checkpoint_id))),
        on("stmgr", pb.RestoreState, gw.on_restore),
        on("stmgr", pb.StartProcessing, lambda conn, m: deliver((InKind.START, m.restore_id))),
        on("stmgr", pb.CheckpointCommitted, lambda conn, m: deliver((InKind.COMMITTED, m.checkpoint_id))),
        on("stmgr", pb.RegisterInstanceResponse, gw.on_registered),
        on("stmgr", pb.NewPhysicalPlan, lambda conn, m: _plan(gw.inbox, m.pplan_json)),
    ])


class GatewayState(enum.Enum):
    CONNECTING = "connecting"
    REGISTERING = "registering"
    RUNNING = "running"
    STOPPED = "stopped"


@dataclass(frozen=True)
class GatewayConfig:
    task_id: int
    component: str
    secret: bytes
    sm_port_file: Path
    max_frame: int
    host: str = "127.0.0.1"  # the container's metrics manager is always local, on loopback
    sm_host: str = "127.0.0.1"  # the stream manager's TCP address (when not on the Unix socket)
    unix_socket: bool = True  # the stream manager's Unix socket (heron_py.instance.unix.socket)
    # both links' heartbeats, as max_frame their frame limit: the topology's, from the executor's
    # arguments (LinkConfig; the links exist before the physical plan brings the config)
    liveness: Liveness = DEFAULT_LIVENESS
    # the task's container, whose stream and metrics managers alone it connects to (their
    # handshake proves it); None: any of the topology's (an instance started by hand)
    container: int | None = None

    def server(self, role: str) -> PeerIdentity | None:
        """What the container's ``role`` ("stmgr", "metricsmgr") must prove in the handshake."""
        return None if self.container is None else PeerIdentity(role, str(self.container))


def task_metrics_link(cfg: GatewayConfig, report: Callable[[], dict[str, Any]], interval_s: float, mm_file: Path,
                      log: logging.Logger, retry_s: float = 1.0) -> MetricsLink:
    """The task's link to its container's metrics manager (``mm_file``, its metricsmgr.json):
    ``report()`` every ``interval_s``; ``Gateway.report_now`` sends one at once."""
    return MetricsLink(mm_file=mm_file, host=cfg.host, secret=cfg.secret, role="instance", peer_id=str(cfg.task_id),
                       expect=cfg.server("metricsmgr"), log=log, max_frame=cfg.max_frame, report=report,
                       interval=lambda: interval_s, liveness=cfg.liveness, retry_s=retry_s)


class GatewayPort:
    """The gateway thread as the execution thread sees it, made before either (instance/wiring.py
    gives it to the outbox, the outbound queue and the gateway): the outbox wakes the gateway
    through it (``wake``, once per flush), and the outbound queue and the shutdown drain read
    where the gateway's connection to the stream manager stands (``wire_mark``). The gateway
    attaches its loop once that runs and says when its connection opens and closes: both are
    known only on the gateway thread, after everything is made."""

    def __init__(self) -> None:
        # (the gateway's running loop, its drain of the outbound queue): set once, as one value
        self._loop_and_drain: tuple[asyncio.AbstractEventLoop, Callable[[], None]] | None = None
        self._conn: Connection | None = None  # to the stream manager while open

    def attach(self, loop: asyncio.AbstractEventLoop, drain: Callable[[], None]) -> None:
        """On the gateway thread, once its loop exists and before the gateway says it started:
        from now on ``wake`` schedules ``drain`` on ``loop`` (until the loop is closed)."""
        self._loop_and_drain = (loop, drain)

    def connected(self, conn: Connection | None) -> None:
        """On the gateway thread: its connection to the stream manager (None once it closed)."""
        self._conn = conn

    def wake(self) -> None:
        """From the execution thread: the gateway takes what was queued (a no-op before its loop
        runs or after it closed)."""
        target = self._loop_and_drain
        if target is not None and not target[0].is_closed():
            target[0].call_soon_threadsafe(target[1])

    def wire_mark(self) -> WireMark | None:
        """Where the gateway's connection to the stream manager stands (queues.WireMark). At a
        take it runs on the gateway's thread; at the drain's end on the execution thread, where
        the two ints may be a moment stale (the stop's count is taken after the queue is empty,
        when only the gateway's own small messages still go)."""
        conn = self._conn
        if conn is None or not conn.is_open:
            return None
        return conn, conn.bytes_out, conn.write_buffer_size()


class Gateway(Routed):
    def __init__(self, cfg: GatewayConfig, *, inbound: queue.Queue[InItem], outbound: queue.Queue[list[bytes]],
                 in_bytes: QueueBytes, out_bytes: QueueBytes, log: logging.Logger,
                 metrics: Callable[[], pb.InstanceMetrics] | None = None,
                 metrics_link: MetricsLink | None = None, port: GatewayPort | None = None) -> None:
        """``port``: how the execution thread reaches this gateway (made before both; a gateway
        of its own when none is given, for a test that drives the gateway alone)."""
        self.cfg = cfg
        self._port = port if port is not None else GatewayPort()
        self.state = GatewayState.CONNECTING
        self._out = outbound
        self.out_bytes = out_bytes
        self.log = log
        self._metrics = metrics
        self.metrics_link = metrics_link
        self.conn: Connection | None = None  # to the stream manager while open; the shutdown drain reads it
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = False
        self.inbox = Inbox(inbound, in_bytes, pause=lambda: self._reading(False), resume=lambda: self._reading(True),
                           call_later=lambda s, f: self._loop.call_later(s, f) if self._loop else None)
        super().__init__(_routes(self))
        self._thread = threading.Thread(target=self._run, name="gateway", daemon=True)
        self.started = threading.Event()

    # --- called from the execution thread ---
    def start(self) -> None:
        self._thread.start()
        self.started.wait()

    def mark_ready(self) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._send_ready)

    def report_now(self, timeout: float = 1.0) -> bool:
        """Sends a metrics report at once (a task about to die reports its exception first);
        True if it went out within ``timeout``."""
        loop, link = self._loop, self.metrics_link
        if loop is None or loop.is_closed() or link is None:
            return False
        link.sent.clear()
        loop.call_soon_threadsafe(link.send_now)
        return link.sent.wait(timeout)

    def stop(self) -> None:
        loop, ev = self._loop, self._stop
        if loop is not None and ev is not None and not loop.is_closed():
            loop.call_soon_threadsafe(ev.set)
        self._thread.join(timeout=5)

    # --- gateway thread ---
    def _run(self) -> None:
        loop = new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._stop = asyncio.Event()
        self._port.attach(loop, self._drain_out)
        self.started.set()
        try:
            loop.run_until_complete(self._main())
        finally:
            self.state = GatewayState.STOPPED
            loop.close()

    async def _main(self) -> None:
        assert self._stop is not None
        mm_task = asyncio.ensure_future(self.metrics_link.run(self._stop)) if self.metrics_link else None
        alive = asyncio.ensure_future(beat())  # the executor's liveness probe (heron_py/common/alive.py)
        try:
            await run_link("stream manager", self._connect, self._session, stop=self._stop, log=self.log)
        finally:
            alive.cancel()
            if mm_task is not None:
                mm_task.cancel()

    async def _connect(self) -> Connection:
        cfg = self.cfg
        self.state = GatewayState.CONNECTING
        try:
            # the port file appears once the stream manager listens (on both its sockets)
            port = int(cfg.sm_port_file.read_text().strip())
        except (OSError, ValueError) as e:
            raise Unreachable(f"stream manager not reachable yet ({e}); retrying") from None
        if cfg.unix_socket:
            sock = ContainerLayout.beside(cfg.sm_port_file).stmgr_socket()
            return await connect_unix(sock, self, cfg.secret, role="instance",
                                      peer_id=str(cfg.task_id), log=self.log, max_frame=cfg.max_frame,
                                      liveness=cfg.liveness, expect=cfg.server("stmgr"))
        return await connect(cfg.sm_host, port, self, cfg.secret, role="instance", peer_id=str(cfg.task_id),
                             log=self.log, max_frame=cfg.max_frame, liveness=cfg.liveness,
                             expect=cfg.server("stmgr"))

    async def _session(self, conn: Connection) -> None:
        """One connection to the stream manager: register, then report metrics every second
        (frames flow through on_frame and _drain_out meanwhile)."""
        self.conn = conn
        self._port.connected(conn)
        try:
            conn.set_write_limits(WRITE_HIGH, WRITE_LOW)
            self.state = GatewayState.REGISTERING
            conn.send_msg(pb.RegisterInstanceRequest(
                task_id=self.cfg.task_id, component=self.cfg.component, pid=os.getpid()))
            while True:
                await asyncio.sleep(1.0)
                if self._metrics is not None and conn.is_open and self.state is GatewayState.RUNNING:
                    conn.send_msg(self._metrics())
        finally:
            self.conn = None
            self._port.connected(None)
            self.state = GatewayState.CONNECTING

    # FrameHandler (what else the stream manager sends goes by _routes)
    def on_registered(self, conn: Connection, resp: pb.RegisterInstanceResponse) -> None:
        if not resp.ok:
            self.log.error("stream manager refused registration: %s", resp.error)
            conn.close(f"registration refused: {resp.error}")
            return
        self.state = GatewayState.RUNNING
        self._drain_out()
        if resp.pplan_json:
            _plan(self.inbox, resp.pplan_json)
        if self._ready:
            self._send_ready()

    def on_restore(self, conn: Connection, msg: pb.RestoreState) -> None:
        """Effectively once's restore: the old run's batches still queued for the execution
        thread go (Inbox.restore), so the restore is not behind them."""
        dropped = self.inbox.restore((InKind.RESTORE, (msg.restore_id, msg.checkpoint_id)))
        if dropped:
            self.log.info("restore %d: %d queued batches and markers of the old run dropped", msg.restore_id,
                          dropped)

    def on_writing(self, conn: Connection, paused: bool) -> None:
        # the stream manager stopped reading us (backpressure): stop moving frames from the
        # outbound queue, which then fills and blocks the execution thread
        if not paused:
            self._drain_out()

    def _reading(self, on: bool) -> None:
        conn = self.conn
        if conn is not None:
            conn.resume_reading() if on else conn.pause_reading()

    def _drain_out(self) -> None:
        conn = self.conn
        if conn is None or not conn.is_open or self.state is not GatewayState.RUNNING:
            return  # frames stay queued (bounded) until the stream manager is back
        while not conn.writing_paused:
            if conn.write_buffer_size() > WRITE_HIGH:  # asyncio pauses above it, too
                # What this loop handed over reaches the transport, and its watermark, only at
                # the connection's write later in this turn; until then writing_paused cannot
                # turn. Come back after that write. Without this stop, an execution thread
                # that refills the queue as fast as we take keeps this loop going, and all it
                # emits piles up in the connection past every bound (800 MB from
                # one spout in a second, then a minute and more of draining).
                loop = self._loop
                if loop is not None:
                    loop.call_soon(self._drain_out)
                return
            try:
                frames = self._out.get_nowait()
            except queue.Empty:
                return
            self.out_bytes.taken += sum(len(f) for f in frames)
            conn.send_many(frames)

    def _send_ready(self) -> None:
        self._ready = True
        conn = self.conn
        if conn is not None and conn.is_open and self.state is GatewayState.RUNNING:
            conn.send_msg(pb.InstanceReady(task_id=self.cfg.task_id, pid=os.getpid()))
        if self.metrics_link is not None:
            # the first report with the task's counters goes now, not an export interval after
            # the start (the link's first report, at its connection, came before the task had a
            # host); on this loop, never waiting, and leaving ``sent`` to report_now's callers
            self.metrics_link.send_now()


def _plan(inbox: Inbox, pplan_json: bytes) -> None:
    """A physical plan goes to the task. The links' frame limit and heartbeats are not taken from
    it: they came before it, from the executor (``GatewayConfig``, ``LinkConfig``)."""
    inbox.deliver((InKind.PPLAN, pplan_json))
