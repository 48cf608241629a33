"""The gateway thread: owns the socket to the stream manager, never runs user code.

Inbound frames go to the execution thread through a bounded queue. When it is full the
gateway stops reading the socket (TCP then pushes back to the stream manager) and retries
on a short timer. Outbound frames come from the execution thread through another bounded
queue; the execution thread wakes us with ``call_soon_threadsafe`` once per flush.
"""

from __future__ import annotations

import asyncio
import collections
import enum
import json
import logging
import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from heron_py.common.daemon import new_event_loop
from heron_py.common.framing import MsgType, encode_frame
from heron_py.common.net import BaseHandler, Connection, connect, parse
from proto import heron_py_pb2 as pb

RETRY_S = 0.001
# the gateway's own socket buffer stays small: the bounded outbound queue is the buffer
WRITE_HIGH = 1 << 20
WRITE_LOW = 256 << 10


class QueueBytes:
    """Bytes in the inbound queue, without a lock: ``put`` is written only by the gateway
    thread and ``taken`` only by the execution thread, so each counter has one writer."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.put = 0
        self.taken = 0

    @property
    def depth(self) -> int:
        return self.put - self.taken


class GatewayState(enum.Enum):
    CONNECTING = "connecting"
    REGISTERING = "registering"
    RUNNING = "running"
    STOPPED = "stopped"


class Gateway(BaseHandler):
    def __init__(
        self,
        *,
        task_id: int,
        component: str,
        secret: bytes,
        sm_port_file: Path,
        inbound: queue.Queue[tuple[str, Any]],
        outbound: queue.Queue[list[bytes]],
        max_frame: int,
        log: logging.Logger,
        in_bytes: QueueBytes | None = None,
        out_bytes: QueueBytes | None = None,
        metrics: Callable[[], pb.InstanceMetrics] | None = None,
        report: Callable[[], dict[str, Any]] | None = None,
        report_interval_s: float = 0.0,
        mm_file: Path | None = None,
    ) -> None:
        # the metrics manager's report: its own connection, so metrics never wait behind tuples
        self._report = report
        self._report_interval = report_interval_s
        self._mm_file = mm_file
        self._mm: Connection | None = None
        self._report_sent = threading.Event()
        self.in_bytes = in_bytes or QueueBytes(1 << 62)
        self.out_bytes = out_bytes
        self._metrics = metrics
        self.task_id = task_id
        self.component = component
        self.state = GatewayState.CONNECTING
        self._secret = secret
        self._port_file = sm_port_file
        self._in = inbound
        self._out = outbound
        self._max_frame = max_frame
        self._log = log
        self._overflow: collections.deque[tuple[str, Any]] = collections.deque()
        self._conn: Connection | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready_sent = False
        self._ready = False
        self._thread = threading.Thread(target=self._run, name="gateway", daemon=True)
        self.started = threading.Event()

    # --- called from the execution thread ---
    def start(self) -> None:
        self._thread.start()
        self.started.wait()

    def wake(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._drain_out)

    def mark_ready(self) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._send_ready)

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
        self.started.set()
        try:
            loop.run_until_complete(self._main())
        finally:
            self.state = GatewayState.STOPPED
            loop.close()

    def report_now(self, timeout: float = 1.0) -> bool:
        """Execution thread: sends a metrics report at once (a task about to die reports its
        exception first); True if it went out within ``timeout``."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._report is None:
            return False
        self._report_sent.clear()
        loop.call_soon_threadsafe(self._send_report)
        return self._report_sent.wait(timeout)

    def _send_report(self) -> None:
        mm = self._mm
        if mm is not None and mm.is_open and self._report is not None:
            mm.send(encode_frame(MsgType.METRICS_REPORT, json.dumps(self._report(), default=repr).encode()))
            self._report_sent.set()

    async def _mm_loop(self) -> None:
        assert self._stop is not None and self._mm_file is not None
        while not self._stop.is_set():
            try:
                port = int(json.loads(self._mm_file.read_text())["port"])
                conn = await connect("127.0.0.1", port, BaseHandler(), self._secret, role="instance",
                                     peer_id=str(self.task_id), log=self._log, max_frame=self._max_frame)
            except (TimeoutError, OSError, ValueError, KeyError, ConnectionError):
                await self._sleep_or_stop(1.0)
                continue
            self._mm = conn
            while conn.is_open and not self._stop.is_set():
                self._send_report()
                await self._sleep_or_stop(self._report_interval)
            self._mm = None
            conn.close()

    async def _main(self) -> None:
        assert self._stop is not None
        mm_task = None
        if self._report is not None and self._report_interval > 0 and self._mm_file is not None:
            mm_task = asyncio.ensure_future(self._mm_loop())
        try:
            await self._sm_loop()
        finally:
            if mm_task is not None:
                mm_task.cancel()

    async def _sm_loop(self) -> None:
        assert self._stop is not None
        while not self._stop.is_set():
            try:
                port = int(self._port_file.read_text().strip())
                self.state = GatewayState.CONNECTING
                conn = await connect("127.0.0.1", port, self, self._secret, role="instance",
                                     peer_id=str(self.task_id), log=self._log, max_frame=self._max_frame)
            except (TimeoutError, OSError, ValueError, ConnectionError) as e:
                self._log.info("stream manager not reachable yet (%s); retrying", e)
                await self._sleep_or_stop(0.5)
                continue
            self._conn = conn
            conn.set_write_limits(WRITE_HIGH, WRITE_LOW)
            self.state = GatewayState.REGISTERING
            conn.send_msg(MsgType.REGISTER_INSTANCE_REQUEST, pb.RegisterInstanceRequest(
                task_id=self.task_id, component=self.component, pid=os.getpid()))
            closed = asyncio.get_running_loop().create_future()
            conn.context = closed
            reporter = asyncio.ensure_future(self._report_metrics(conn))
            stop_wait = asyncio.ensure_future(self._stop.wait())
            await asyncio.wait([closed, stop_wait], return_when=asyncio.FIRST_COMPLETED)
            stop_wait.cancel()
            reporter.cancel()
            self._conn = None
            conn.close()
            if not self._stop.is_set():
                self._log.warning("connection to stream manager lost; reconnecting")
                await self._sleep_or_stop(0.2)

    async def _report_metrics(self, conn: Connection) -> None:
        while self._metrics is not None:
            await asyncio.sleep(1.0)
            if conn.is_open and self.state is GatewayState.RUNNING:
                conn.send_msg(MsgType.INSTANCE_METRICS, self._metrics())

    async def _sleep_or_stop(self, seconds: float) -> None:
        assert self._stop is not None
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
        except TimeoutError:
            pass

    # FrameHandler
    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        if msg_type == MsgType.TUPLE_BATCH:
            self._deliver(("batch", frame))
        elif msg_type == MsgType.ACK_RESULT:
            self._deliver(("acks", frame))
        elif msg_type == MsgType.REGISTER_INSTANCE_RESPONSE:
            resp = pb.RegisterInstanceResponse()
            parse(resp, frame)
            if not resp.ok:
                self._log.error("stream manager refused registration: %s", resp.error)
                conn.close()
                return
            self.state = GatewayState.RUNNING
            self._drain_out()
            if resp.pplan_json:
                self._deliver(("pplan", resp.pplan_json))
            if self._ready:
                self._send_ready()
        elif msg_type == MsgType.NEW_PHYSICAL_PLAN:
            msg = pb.NewPhysicalPlan()
            parse(msg, frame)
            self._deliver(("pplan", msg.pplan_json))
        else:
            self._log.warning("unexpected message type %d from stream manager; ignored", msg_type)

    def on_writing(self, conn: Connection, paused: bool) -> None:
        # the stream manager stopped reading us (backpressure): stop moving frames from the
        # outbound queue, which then fills and blocks the execution thread
        if not paused:
            self._drain_out()

    def on_close(self, conn: Connection) -> None:
        fut = conn.context
        if isinstance(fut, asyncio.Future) and not fut.done():
            fut.set_result(None)

    def _deliver(self, item: tuple[str, Any]) -> None:
        if self._overflow:
            self._overflow.append(item)
            return
        try:
            if item[0] == "batch" and self.in_bytes.depth >= self.in_bytes.limit:
                raise queue.Full
            self._put(item)
        except queue.Full:
            self._overflow.append(item)
            if self._conn is not None:
                self._conn.pause_reading()
            assert self._loop is not None
            self._loop.call_later(RETRY_S, self._retry_overflow)

    def _put(self, item: tuple[str, Any]) -> None:
        self._in.put_nowait(item)
        if item[0] == "batch":
            self.in_bytes.put += len(item[1])

    def _retry_overflow(self) -> None:
        while self._overflow:
            try:
                head = self._overflow[0]
                if head[0] == "batch" and self.in_bytes.depth >= self.in_bytes.limit:
                    raise queue.Full
                self._put(head)
            except queue.Full:
                assert self._loop is not None
                self._loop.call_later(RETRY_S, self._retry_overflow)
                return
            self._overflow.popleft()
        if self._conn is not None:
            self._conn.resume_reading()

    def _drain_out(self) -> None:
        conn = self._conn
        if conn is None or not conn.is_open or self.state is not GatewayState.RUNNING:
            return  # frames stay queued (bounded) until the stream manager is back
        assert conn.transport is not None
        while not conn.writing_paused:
            try:
                frames = self._out.get_nowait()
            except queue.Empty:
                return
            if self.out_bytes is not None:
                self.out_bytes.taken += sum(len(f) for f in frames)
            conn.transport.writelines(frames)

    def _send_ready(self) -> None:
        self._ready = True
        conn = self._conn
        if conn is not None and conn.is_open and self.state is GatewayState.RUNNING:
            conn.send_msg(MsgType.INSTANCE_READY, pb.InstanceReady(task_id=self.task_id, pid=os.getpid()))
