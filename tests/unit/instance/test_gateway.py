"""The gateway's move of outbound flushes into its connection to the stream manager
(instance/gateway.py ``_drain_out``), on a real authenticated connection."""

from __future__ import annotations

import asyncio
import json
import logging
import queue
from pathlib import Path

from heron_py.common.framing import HEADER_SIZE, MsgType, encode_frame
from heron_py.common.net import BaseHandler, Counters, connect, serve
from instance.gateway import WRITE_HIGH, Gateway, GatewayConfig, GatewayState, task_metrics_link
from instance.queues import InItem, OutQueue, QueueBytes

SECRET = b"s" * 32
LOG = logging.getLogger("test-gateway")
FLUSH = [encode_frame(MsgType.TUPLE_BATCH, b"x" * 10_000)]


class EndlessQueue(OutQueue):
    """An execution thread at least as fast as the gateway: a flush is always waiting, up to
    ``limit`` takes (then the queue is empty, so an unbounded loop ends and can be measured)."""

    def __init__(self, limit: int) -> None:
        super().__init__(0, 1 << 30)
        self.limit = limit
        self.taken = 0

    def get_nowait(self) -> list[bytes]:
        if self.taken >= self.limit:
            raise queue.Empty
        self.taken += 1
        return FLUSH


class Still(BaseHandler):
    """A stream manager that stops reading the instance (its backpressure)."""

    def on_open(self, conn) -> None:  # type: ignore[no-untyped-def]
        conn.pause_reading()


async def test_a_producer_as_fast_as_the_gateway_cannot_pile_flushes_up_in_the_connection(tmp_path: Path) -> None:
    server = await serve("127.0.0.1", 0, Still, SECRET, role="stmgr", log=LOG, counters=Counters())
    port = server.sockets[0].getsockname()[1]
    gw = Gateway(GatewayConfig(task_id=3, component="spout", secret=SECRET, sm_port_file=tmp_path / "port",
                               max_frame=1 << 24),
                 inbound=queue.Queue[InItem](), outbound=EndlessQueue(limit=10_000),
                 in_bytes=QueueBytes(1 << 20), out_bytes=QueueBytes(1 << 20), log=LOG)
    conn = await connect("127.0.0.1", port, gw, SECRET, role="instance", peer_id="3", log=LOG)
    try:
        gw.conn, gw.state, gw._loop = conn, GatewayState.RUNNING, asyncio.get_running_loop()
        conn.set_write_limits(WRITE_HIGH, WRITE_LOW := WRITE_HIGH // 4)
        assert WRITE_LOW < WRITE_HIGH
        gw._drain_out()
        # one turn hands the connection at most the high watermark and one flush more
        assert conn.write_buffer_size() <= WRITE_HIGH + len(FLUSH[0]) + 64, conn.write_buffer_size()
        for _ in range(50):  # the write, then the re-scheduled takes, until the watermark holds
            await asyncio.sleep(0.01)
        out = gw._out
        assert isinstance(out, EndlessQueue)
        assert conn.writing_paused, "the stream manager reads nothing: the transport must stand above its watermark"
        # the 10,000 flushes (100 MB) were not all taken: the gateway stopped at the watermark
        # (plus the kernel's socket buffers), so the rest stays in the bounded queue upstream
        assert out.taken < 1_000, out.taken
        assert conn.write_buffer_size() <= 2 * WRITE_HIGH + len(FLUSH[0]), conn.write_buffer_size()
    finally:
        conn.abort("test end")
        server.close()


class Reports(BaseHandler):
    """A metrics manager that records the reports it is sent."""

    def __init__(self) -> None:
        self.reports: list[bytes] = []

    def on_frame(self, conn, msg_type, frame) -> None:  # type: ignore[no-untyped-def]
        if msg_type == MsgType.METRICS_REPORT:
            self.reports.append(frame)


async def test_a_report_owed_before_the_metrics_manager_is_up_goes_out_as_soon_as_it_is(tmp_path: Path) -> None:
    """A task that dies at start may report its exception before its container's metrics manager
    has written its port: the link owes the report and tries again every OWED_RETRY_S, instead
    of after its retry (30 s here; 1 s in an instance), and its first report pays it. Before,
    the report waited for the retry and the dying task had stopped waiting (an exception missing
    from /topologies/exceptions, seen in CI)."""
    rec = Reports()
    server = await serve("127.0.0.1", 0, lambda: rec, SECRET, role="metricsmgr", log=LOG, counters=Counters())
    mm_file = tmp_path / "metricsmgr.json"  # not there yet: the first try fails
    cfg = GatewayConfig(task_id=2, component="boom", secret=SECRET, sm_port_file=tmp_path / "port", max_frame=1 << 20)
    link = task_metrics_link(cfg, lambda: {"exceptions": ["ValueError: boom"]}, 60.0, mm_file, LOG, retry_s=30.0)
    stop = asyncio.Event()
    runner = asyncio.ensure_future(link.run(stop))
    try:
        await asyncio.sleep(0.2)  # the first try failed; the next one is 30 s away
        link.send_now()  # the dying task's report_now, on the loop
        await asyncio.sleep(0.2)
        assert rec.reports == [] and not link.sent.is_set()  # still no metrics manager
        mm_file.write_text(json.dumps({"port": server.sockets[0].getsockname()[1]}))
        for _ in range(100):
            if link.sent.is_set():
                break
            await asyncio.sleep(0.05)
        assert link.sent.is_set(), "the owed report did not go out within 5 s of the metrics manager's start"
        for _ in range(40):
            if rec.reports:
                break
            await asyncio.sleep(0.05)
        assert [json.loads(r[HEADER_SIZE:]) for r in rec.reports] == [{"exceptions": ["ValueError: boom"]}]
    finally:
        stop.set()
        await runner
        server.close()
