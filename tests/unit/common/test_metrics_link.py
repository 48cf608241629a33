"""The link to a container's metrics manager (heron_py/common/metrics_link.py), as the stream
manager uses it: an interval read before every report (none while it is 0), the metrics
manager's identity proved in the handshake, a value JSON cannot encode sent as its repr. (The
instance's owed report: tests/unit/instance/test_gateway.py.)"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

from heron_py.common.framing import HEADER_SIZE, MsgType
from heron_py.common.handshake import PeerIdentity
from heron_py.common.metrics_link import MetricsLink
from heron_py.common.net import BaseHandler, Counters, serve
from tests.support import until

SECRET = b"m" * 32
LOG = logging.getLogger("test-metrics-link")


class Reports(BaseHandler):
    """A metrics manager that records who sent which report."""

    def __init__(self) -> None:
        self.reports: list[dict[str, object]] = []

    def on_frame(self, conn, msg_type, frame) -> None:  # type: ignore[no-untyped-def]
        if msg_type == MsgType.METRICS_REPORT:
            self.reports.append(json.loads(frame[HEADER_SIZE:]))


async def test_reports_follow_the_interval_and_none_go_while_it_is_0(tmp_path: Path) -> None:
    rec = Reports()
    server = await serve("127.0.0.1", 0, lambda: rec, SECRET, role="metricsmgr", log=LOG, counters=Counters(),
                         server_id="4")
    (tmp_path / "metricsmgr.json").write_text(json.dumps({"port": server.sockets[0].getsockname()[1]}))
    interval = [0.0]
    sent = [0]

    def report() -> dict[str, object]:
        sent[0] += 1
        return {"n": sent[0], "odd": {1, 2} if sent[0] == 1 else None}

    link = MetricsLink(mm_file=tmp_path / "metricsmgr.json", host="127.0.0.1", secret=SECRET, role="stmgr",
                       peer_id="4", expect=PeerIdentity("metricsmgr", "4"), log=LOG, max_frame=1 << 20,
                       report=report, interval=lambda: interval[0])
    stop = asyncio.Event()
    runner = asyncio.ensure_future(link.run(stop))
    try:
        await until(lambda: link._conn is not None, 5.0)
        await asyncio.sleep(0.3)
        assert rec.reports == [] and not link.sent.is_set()  # interval 0: connected, nothing sent
        interval[0] = 0.05  # read again within IDLE_S
        await until(lambda: len(rec.reports) >= 3, 5.0)
        assert rec.reports[0] == {"n": 1, "odd": "{1, 2}"}  # a set is no JSON: its repr
        assert [r["n"] for r in rec.reports[:3]] == [1, 2, 3] and link.sent.is_set()
    finally:
        stop.set()
        await runner
        server.close()


async def test_a_metrics_manager_of_another_container_is_refused(tmp_path: Path) -> None:
    rec = Reports()
    server = await serve("127.0.0.1", 0, lambda: rec, SECRET, role="metricsmgr", log=LOG, counters=Counters(),
                         server_id="5")
    (tmp_path / "metricsmgr.json").write_text(json.dumps({"port": server.sockets[0].getsockname()[1]}))
    link = MetricsLink(mm_file=tmp_path / "metricsmgr.json", host="127.0.0.1", secret=SECRET, role="stmgr",
                       peer_id="4", expect=PeerIdentity("metricsmgr", "4"), log=LOG, max_frame=1 << 20,
                       report=dict, interval=lambda: 0.05)
    stop = asyncio.Event()
    runner = asyncio.ensure_future(link.run(stop))
    try:
        await asyncio.sleep(0.3)
        assert rec.reports == [] and link._conn is None
    finally:
        stop.set()
        await runner
        server.close()
