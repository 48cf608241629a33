"""The gateway's move of outbound flushes into its connection to the stream manager
(instance/gateway.py ``_drain_out``), on a real authenticated connection."""

from __future__ import annotations

import asyncio
import logging
import queue
from pathlib import Path

from heron_py.common.framing import MsgType, encode_frame
from heron_py.common.net import BaseHandler, Counters, connect, serve
from instance.gateway import WRITE_HIGH, Gateway, GatewayConfig, GatewayState
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
