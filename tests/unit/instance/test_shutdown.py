"""An instance's end (instance/main.py, execution.py, queues.py): a SIGTERM stops the spout
loop, the component is deactivated and closed, its emitter flushed, then the outbound queue is
sent to the stream manager within heron_py.instance.shutdown.drain.secs; what could not go is
counted in __dropped-tuples/shutdown, in the last metrics report and one log line.

A real instance process (``python -m instance``) runs against a stream manager and a metrics
manager played by real servers on 127.0.0.1 (heron_py.common.net, the real handshake and frame
tags) that read the instance slowly, or not at all, at will."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.common.config import ConfigError
from heron_py.common.framing import BODY_OFFSET, HEADER_SIZE, MsgType, batch_count
from heron_py.common.net import BaseHandler, Connection, Counters, Liveness, serve
from heron_py.common.serialization import loads_batch
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from instance.execution import shutdown_drain_secs
from proto import heron_py_pb2 as pb

ROOT = Path(__file__).resolve().parents[3]
SECRET = b"s" * 32
TUPLE_BYTES = 8 << 10  # 8 KiB a tuple, one tuple a frame: megabytes queue up behind a slow reader
BURST = 3000  # 24 MiB: more than the socket buffers hold, so the outbound queue backs up


class BurstSpout(Spout):
    """Emits BURST numbered tuples, then nothing; says in its output when it is deactivated
    and closed, so the stream manager sees the shutdown's order."""

    outputs = ["n", "pad"]

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.n = 0
        self.pad = b"p" * TUPLE_BYTES

    def next_tuple(self) -> None:
        if self.n < BURST:
            self.n += 1
            self.emit([self.n, self.pad])

    def deactivate(self) -> None:
        self.emit(["deactivate", b""])

    def close(self) -> None:
        self.emit(["close", b""])


class Sink(Bolt):
    outputs: list[str] = []

    def process(self, tup: Any) -> None:
        pass


def _plan(drain_s: float) -> PhysicalPlan:
    b = TopologyBuilder("drain")
    s = b.add_spout("spout", BurstSpout, par=1)
    b.add_bolt("sink", Sink, par=1, inputs={s: Grouping.SHUFFLE})
    b.set_config({"heron_py.instance.batch.size": 1, "heron_py.instance.shutdown.drain.secs": drain_s})
    topo = b.build()
    return PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "127.0.0.1", 1, 2),),
                        TopologyState.RUNNING, 1)


class FakeStmgr(BaseHandler):
    """The stream manager's side of an instance's connection: registration, then tuples
    counted (and their values kept) as read; ``reading`` False stops reading the socket."""

    def __init__(self, pplan_json: bytes, loop: asyncio.AbstractEventLoop) -> None:
        self.pplan_json = pplan_json
        self.loop = loop
        self.conn: Connection | None = None
        self.tuples = 0
        self.markers: list[str] = []
        self.closed = threading.Event()
        self.first = threading.Event()
        self.reading = True
        self.chunk_pause_s = 0.0  # a slow reader: a pause after each batch

    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        if msg_type == MsgType.REGISTER_INSTANCE_REQUEST:
            self.conn = conn
            conn.send_msg(pb.RegisterInstanceResponse(
                ok=True, pplan_json=self.pplan_json))
        elif msg_type == MsgType.TUPLE_BATCH:
            self.tuples += batch_count(frame)
            for _stream, values, *_ in loads_batch(memoryview(frame)[BODY_OFFSET:]):
                if isinstance(values[0], str):
                    self.markers.append(values[0])
            self.first.set()
            if not self.reading:
                conn.pause_reading()
            elif self.chunk_pause_s:
                conn.pause_reading()
                self.loop.call_later(self.chunk_pause_s, self._resume)

    def _resume(self) -> None:
        if self.conn is not None and self.reading:
            self.conn.resume_reading()

    def read_again(self) -> None:
        """Reads everything, at full speed (from the test's thread)."""
        def go() -> None:
            self.reading, self.chunk_pause_s = True, 0.0
            if self.conn is not None:
                self.conn.resume_reading()
        self.loop.call_soon_threadsafe(go)

    def read_slowly(self, pause_s: float) -> None:
        """Reads again, pausing ``pause_s`` after each batch (from the test's thread)."""
        def go() -> None:
            self.reading, self.chunk_pause_s = True, pause_s
            if self.conn is not None:
                self.conn.resume_reading()
        self.loop.call_soon_threadsafe(go)

    def on_close(self, conn: Connection) -> None:
        self.closed.set()


class FakeMetricsMgr(BaseHandler):
    def __init__(self) -> None:
        self.reports: list[dict[str, Any]] = []

    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        if msg_type == MsgType.METRICS_REPORT:
            self.reports.append(json.loads(frame[HEADER_SIZE:]))


class Servers:
    """One event loop thread serving a FakeStmgr and a FakeMetricsMgr per run."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="servers", daemon=True)
        self.thread.start()
        self.log = logging.getLogger("fake-servers")

    def start(self, folder: Path, plan: PhysicalPlan) -> tuple[FakeStmgr, FakeMetricsMgr]:
        sm = FakeStmgr(json.dumps(plan.to_dict()).encode(), self.loop)
        mm = FakeMetricsMgr()
        quiet = Liveness(interval_s=60.0, timeout_s=0.0)  # no pings into a closing instance's socket

        async def listen() -> tuple[int, int]:
            s1 = await serve("127.0.0.1", 0, lambda: sm, SECRET, role="stmgr", log=self.log, counters=Counters(),
                             liveness=quiet)
            s2 = await serve("127.0.0.1", 0, lambda: mm, SECRET, role="metricsmgr", log=self.log,
                             counters=Counters(), liveness=quiet)
            return s1.sockets[0].getsockname()[1], s2.sockets[0].getsockname()[1]

        sm_port, mm_port = asyncio.run_coroutine_threadsafe(listen(), self.loop).result(10)
        (folder / "stmgr.port").write_text(str(sm_port))
        (folder / "metricsmgr.json").write_text(json.dumps({"port": mm_port}))
        return sm, mm

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="module")
def servers() -> Iterator[Servers]:
    s = Servers()
    yield s
    s.stop()


def _start_instance(folder: Path, plan: PhysicalPlan) -> subprocess.Popen[str]:
    pkg = folder / "pkg"
    pkg.mkdir()
    (pkg / "__heron_package__.json").write_text(json.dumps({"main": "topology.yaml"}))  # a stand-in main
    (pkg / "topology.yaml").write_text("")
    (folder / "secret").write_bytes(SECRET)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HERON_PY_PURE": "1"}
    env.pop("HERON_PY_ALIVE_FILE", None)
    return subprocess.Popen(
        [sys.executable, "-m", "instance", "--topology", "drain", "--task-id",
         str(plan.packing.tasks_of("spout")[0]), "--component", "spout", "--sm-port-file", str(folder / "stmgr.port"),
         "--secret-file", str(folder / "secret"), "--package-dir", str(pkg), "--tcp", "--metrics-interval", "0.1",
         "--out-queue-batches", "4"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _last_counters(mm: FakeMetricsMgr) -> dict[str, float]:
    assert mm.reports, "no metrics report reached the metrics manager"
    counters: dict[str, float] = mm.reports[-1]["counters"]
    return counters


def _wait(ev: threading.Event, what: str, timeout: float = 30.0) -> None:
    if not ev.wait(timeout):
        raise AssertionError(f"timed out waiting for {what}")


def _wait_backed_up(mm: FakeMetricsMgr) -> None:
    """Until reports (every 0.1 s) show the outbound queue full over 0.3 s: the socket buffers
    are full by then, and the stop has megabytes to drain. (One full report is not enough: a
    task reports as soon as it is ready, when its queue may fill for a moment before the gateway
    has written the socket buffers full.) Each report is read once; a report that finds the
    queue just short of full (a flush taken between two of the spout's, on a loaded machine) does
    not start the count again, three in a row do."""
    tick = threading.Event()
    full_since: float | None = None
    full = short = 0
    seen = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        reports = mm.reports[seen:]
        seen += len(reports)
        for report in reports:
            if report["gauges"].get("__out-queue-batches", 0) >= 4:
                full_since = full_since if full_since is not None else time.monotonic()
                full, short = full + 1, 0
            else:
                short += 1
                if short >= 3:
                    full_since, full = None, 0
        if full_since is not None and full >= 3 and time.monotonic() - full_since >= 0.3:
            return
        tick.wait(0.05)
    raise AssertionError("the outbound queue never stayed full")


def test_a_sigterm_drains_everything_to_a_slow_stream_manager_in_order(servers: Servers, tmp_path: Path) -> None:
    plan = _plan(drain_s=20.0)  # ample: a slow reader still gets everything
    sm, mm = servers.start(tmp_path, plan)
    # no reading until the outbound queue is full (a loaded machine's spout may emit no faster
    # than a slow reader takes: the queue then never stayed full), then a slow reader
    sm.reading = False
    proc = _start_instance(tmp_path, plan)
    try:
        _wait(sm.first, "the first tuples")
        _wait_backed_up(mm)
        sm.read_slowly(0.02)  # slow: a pause after each read
        proc.send_signal(signal.SIGTERM)  # mid-burst: megabytes still queued and held
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    _wait(sm.closed, "the instance's connection to close")
    counters = _last_counters(mm)
    emitted = counters["__emit-count/default"]
    assert counters["__dropped-tuples/shutdown"] == 0, out
    assert sm.tuples == emitted and emitted > 2, out  # every tuple emitted arrived
    # the order of the end: deactivate, then close, each emit flushed before the drain
    assert sm.markers == ["deactivate", "close"], out
    assert proc.returncode == 0, out
    assert "shutdown dropped" not in out


def test_a_drain_that_runs_out_of_time_counts_exactly_what_it_dropped(servers: Servers, tmp_path: Path) -> None:
    plan = _plan(drain_s=0.5)
    sm, mm = servers.start(tmp_path, plan)
    sm.reading = False  # reads the first batch, then nothing until the instance is gone
    proc = _start_instance(tmp_path, plan)
    try:
        _wait(sm.first, "the first tuples")
        _wait_backed_up(mm)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    sm.read_again()  # what the kernel holds for us still arrives after the instance exited
    _wait(sm.closed, "the instance's connection to close")
    counters = _last_counters(mm)
    emitted, dropped = counters["__emit-count/default"], counters["__dropped-tuples/shutdown"]
    assert dropped > 0, out
    assert sm.tuples + dropped == emitted, (sm.tuples, dropped, emitted, out)  # nothing lost uncounted
    lines = [ln for ln in out.splitlines() if "shutdown dropped" in ln]
    assert len(lines) == 1 and f"shutdown dropped {int(dropped)} tuples" in lines[0], out
    assert "heron_py.instance.shutdown.drain.secs = 0.5s (__dropped-tuples/shutdown)" in lines[0]
    # most were in the connection's unwritten bytes (the gateway's 1 MiB write mark: ~128 of
    # these tuples), counted from the wire ledger; the rest never left the queue
    cut = re.search(r"; (\d+) tuples of them in the connection's unwritten bytes\)", lines[0])
    assert cut is not None and 0 < int(cut.group(1)) <= dropped, lines[0]


def test_a_bad_drain_time_is_one_error_line_naming_the_task() -> None:
    with pytest.raises(ConfigError) as e:
        shutdown_drain_secs({"heron_py.instance.shutdown.drain.secs": "soon"}, 3, "spout")
    assert str(e.value) == ("task 3 (spout): config heron_py.instance.shutdown.drain.secs: expected a number of "
                            "seconds >= 0, found 'soon'")
    assert shutdown_drain_secs({}, 3, "spout") == 3.0
    assert shutdown_drain_secs({"heron_py.instance.shutdown.drain.secs": "0"}, 3, "spout") == 0.0
