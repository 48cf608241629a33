"""The bound backpressure keeps with the engine's defaults (a topology that sets no watermark,
queue or batch size): a spout as fast as it can go into a bolt that takes 5 ms per 1-KB tuple, 2
containers. Sampled every second from the containers' metrics (metrics.jsonl) and from the stream
managers' processes while the clique is in backpressure, each stream manager and each instance
holds at most what docs/guides/backpressure.md says, with the defaults it states: per connection
a high watermark (16 MB) plus what each peer still sends before it pauses, per stream manager its
connections' and peers' high watermarks and the frames it holds for destinations not connected
yet, per instance its queues' bytes (8 MB each way) and a batch past each."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from heron_py.common.config import BATCH, HIGH, IN_Q_BYTES, LOW, MB, OUT_Q_BYTES
from heron_py.common.container_layout import TopologyPaths
from heron_py.state import LocalFsStateManager
from tests.integration.test_cli import cli
from tests.support import wait_for

pytestmark = pytest.mark.integration

TOPOLOGY = Path(__file__).resolve().parent / "topologies" / "untuned_backpressure.py"
NAME = "bp_bound"
CONTAINERS = 2
PEERS = CONTAINERS - 1
# the defaults docs/guides/backpressure.md states (checked against the code's at the end)
H = 16 * MB  # heron.streammgr.network.backpressure.highwatermark.mb
QUEUE = 8 * MB  # heron_py.instance.inbound.queue.bytes, heron_py.instance.outbound.queue.bytes
HELD = 4 * H  # frames a stream manager holds for destinations not connected yet, in all
TUPLE_BYTES = 1100  # the topology's 1-KB payload and sequence number, pickled (generous)
BATCH_BYTES = 1024 * TUPLE_BYTES  # a flush of the default batch size
IDLE_PSS = 30 * MB  # a stream manager's own memory, with nothing buffered (bench/RESULTS.md: 15-23 MB)
SAMPLE_S = 12  # seconds of sampling once the clique is in backpressure


def _reports(home: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in TopologyPaths.of(NAME, home).logs.glob("container-*/metrics.jsonl"):
        for line in f.read_text(errors="replace").splitlines():
            try:
                out.extend(json.loads(line)["reports"])
            except ValueError:
                continue  # a line being written
    return out


def _in_backpressure(home: Path) -> bool:
    return any(r["kind"] == "stmgr" and r["gauges"].get("__in-backpressure") for r in _reports(home))


def _stmgr_pss(home: Path) -> dict[str, int]:
    stmgrs = LocalFsStateManager(home).get_execution_state(NAME)["stmgrs"]
    return {c: psutil.Process(int(s["pid"])).memory_full_info().pss for c, s in stmgrs.items()}


def test_the_default_watermarks_and_queues_bound_what_stream_managers_and_instances_hold(heron_home):
    cli(heron_home, "submit", "local", "--name", NAME, "--config-property", "topology.metrics.export.interval.secs=1",
        str(TOPOLOGY))
    try:
        wait_for(lambda: _in_backpressure(heron_home), 30, "a stream manager in backpressure")
        start = time.time()
        pss: dict[str, int] = {}
        for _ in range(SAMPLE_S):
            time.sleep(1)
            for c, n in _stmgr_pss(heron_home).items():
                pss[c] = max(pss.get(c, 0), n)
        samples = [r for r in _reports(heron_home) if r["time"] >= start]
    finally:
        cli(heron_home, "kill", "local", NAME, check=False)
    stmgrs = [r for r in samples if r["kind"] == "stmgr"]
    instances = [r for r in samples if r["kind"] == "instance"]
    # a report a second from each (fewer on a loaded machine)
    assert len(stmgrs) >= CONTAINERS * SAMPLE_S // 2 and instances
    # the clique was in backpressure: spouts paused in most reports
    assert sum(r["gauges"]["__spouts-paused"] for r in stmgrs) >= len(stmgrs) // 2
    most = {"connection": 0, "stream manager": 0, "held": 0, "inbound queue": 0, "outbound queue": 0}
    for r in stmgrs:
        conns = {k: v for k, v in r["gauges"].items() if k.startswith("__buffered-bytes/")}
        held = r["gauges"]["__held-bytes"]
        # per connection: its high watermark, and what each peer still sends before it pauses
        # (at most the peer's own connection to us, under its high watermark)
        assert max(conns.values()) <= (1 + PEERS) * H, (r["container"], conns)
        # per stream manager: every connection's and every peer's high watermark, and the frames
        # held for destinations not connected yet
        assert sum(conns.values()) <= (len(conns) + PEERS) * H, (r["container"], conns)
        assert held <= HELD
        most["connection"] = max(most["connection"], *conns.values())
        most["stream manager"] = max(most["stream manager"], sum(conns.values()) + held)
        most["held"] = max(most["held"], held)
    for r in instances:
        # per instance: each queue's bytes, and one batch past it (taken whole)
        assert r["gauges"]["__in-queue-bytes"] <= QUEUE + BATCH_BYTES, r
        assert r["gauges"]["__out-queue-bytes"] <= QUEUE + BATCH_BYTES, r
        most["inbound queue"] = max(most["inbound queue"], r["gauges"]["__in-queue-bytes"])
        most["outbound queue"] = max(most["outbound queue"], r["gauges"]["__out-queue-bytes"])
    print(f"\nmost held (MB): {({k: round(v / MB, 1) for k, v in most.items()})}; stream managers' PSS "
          f"{({c: round(v / MB) for c, v in pss.items()})} MB")
    # the processes: a stream manager's own memory and at most its connections' bound (3 here:
    # its spout's, its bolt's and its peer's), whatever Python's allocator keeps
    assert all(n <= IDLE_PSS + (3 + PEERS) * H for n in pss.values()), pss
    # the defaults the docs state are the code's
    assert (HIGH.default * MB, LOW.default * MB, IN_Q_BYTES.default, OUT_Q_BYTES.default, BATCH.default) == (
        H, H // 2, QUEUE, QUEUE, 1024)
