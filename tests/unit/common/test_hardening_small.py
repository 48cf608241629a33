"""Issue 18, defect 10 (the rest): message timeout <= 0 refused at submit; ParquetSink acks
only after fsync; a HandshakeError in an admin command is one clear error; a user metric JSON
cannot carry is reported once and left out; a "node vanished" event during a claim in flight
is not lost."""

import asyncio
import json
import logging
import os
import queue
import threading
import time
from types import SimpleNamespace

import pytest

from heron_py.common.config import ConfigError, check_topology_config
from heron_py.common.net import BaseHandler, Counters, serve
from heron_py.state import TManagerLocation
from instance.metrics import TaskReports
from instance.queues import QueueBytes
from topology_master.election import ClaimGate, Election, Role, StateWorker


@pytest.mark.parametrize("value", ["0", -1, 0.0])
def test_a_message_timeout_of_zero_or_less_is_refused_at_submit(value):
    with pytest.raises(ConfigError) as e:
        check_topology_config({"topology.message.timeout.secs": value}, {})
    assert str(e.value) == f"config topology.message.timeout.secs: expected a number of seconds > 0, found {value!r}"


def test_parquet_sink_acks_only_after_the_file_and_its_name_are_fsynced(tmp_path, monkeypatch):
    from heron_py.spark.sink import ParquetSink

    events = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd)))
    delegate = SimpleNamespace(ack=lambda t: events.append(f"ack {t.values[0]}"), fail=lambda t: events.append("fail"),
                               log=lambda *a: None, logger=logging.getLogger("sink"))
    sink = ParquetSink(delegate)
    sink.folder, sink.fields, sink.prefix, sink.seq, sink.written_rows = tmp_path, ["word", "n"], "part-1", 0, 0
    sink.rows, sink.tuples, sink.max_rows = [], [], 100
    for w in ("a", "b"):
        sink.process(SimpleNamespace(values=[w, 1]))
    sink.flush()
    assert events == ["fsync", "fsync", "ack a", "ack b"]  # the file, then the folder, then the acks
    assert [p.name for p in tmp_path.iterdir()] == ["part-1-000000.parquet"]


def test_a_handshake_error_in_an_admin_command_is_one_clear_error(tmp_path):
    from heron_py.cli.admin import AdminError, admin_command

    async def other_topologys_master():
        return await serve("127.0.0.1", 0, BaseHandler, b"another topology's secret", role="tmanager",
                           log=logging.getLogger("other"), counters=Counters())

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(other_topologys_master())
    port = server.sockets[0].getsockname()[1]
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        state = SimpleNamespace(get_tmanager_location=lambda n: TManagerLocation("127.0.0.1", port, 1),
                                get_secret=lambda n: b"our secret", get_tls=lambda n: None)
        with pytest.raises(AdminError) as e:
            admin_command(state, "wc", "status", timeout=5.0)
        assert str(e.value) == (
            f"topology master of 'wc' at 127.0.0.1:{port} refused the CLI: server 127.0.0.1:{port} refused us: "
            "authentication failed (expected the master of 'wc'; is the location in the state manager stale?)")
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)


class _Outbox:
    bytes = QueueBytes(1)
    time_blocked_s = 0.0
    dropped_tuples = 0  # what a stop could not send (instance/queues.py Outbox)

    def qsize(self):
        return 0


def _host(user):
    metrics = SimpleNamespace(acked=0, failed=0, timed_out=0, percentile=lambda q: None)
    return SimpleNamespace(emitter=SimpleNamespace(emitted_by_stream={}, emitted=0), metrics=metrics,
                           user_metrics=user)


def test_a_user_metric_json_cannot_carry_is_reported_once_and_left_out_the_rest_kept(caplog):
    reports = TaskReports(3, "count", queue.Queue(), QueueBytes(1), _Outbox())
    reports.host = _host({"good": 5, "by_key": {"a": 1}, "tuple_keys": {(1, 2): 3}, "obj": object()})
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            doc = reports.report()
            json.dumps(doc)  # what the gateway sends: before, a tuple key made this raise every time
    assert doc["user"] == {"good": 5, "by_key": {"a": 1}}
    assert doc["gauges"]["__user-metrics-skipped"] == 2
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2 and all("is left out of reports" in w for w in warned)
    assert warned[0].startswith("user metric 'tuple_keys' of task 3: expected a number, or a dict of numbers "
                                "with string keys (JSON), found dict (keys must be str")


def test_a_claim_gate_never_loses_a_request():
    g = ClaimGate()
    assert g.request() and not g.request() and not g.request()
    assert g.done() is True  # one more claim for the requests made meanwhile
    assert g.request() and g.done() is False


OTHER = TManagerLocation("10.0.0.9", 9, 99, owner="other")


class _State:
    """The first claim reads the node while the old master still holds it, and returns only
    after the node vanished (its watch fired meanwhile)."""

    def __init__(self):
        self.calls = 0
        self.in_claim = threading.Event()
        self.release = threading.Event()
        self.watch = None

    def add_session_listener(self, listener):
        pass

    def watch_tmanager_location(self, name, callback):
        self.watch = callback
        return lambda: None

    def acquire_tmanager(self, name, loc):
        self.calls += 1
        if self.calls == 1:
            self.in_claim.set()
            self.release.wait(5)
            return OTHER
        return None

    def release_tmanager(self, name):
        pass


def test_a_node_vanished_during_a_claim_in_flight_makes_the_standby_take_over():
    async def run():
        state = _State()
        roles = []
        worker = StateWorker(logging.getLogger("t"))
        election = Election(state=state, worker=worker, topology="wc",
                            location=lambda: TManagerLocation("127.0.0.1", 1, os.getpid()),
                            loop=asyncio.get_running_loop(), on_role=lambda r, h: roles.append(r),
                            log=logging.getLogger("t"))
        election.start()
        await asyncio.to_thread(state.in_claim.wait, 5)
        state.watch(None)  # kazoo's thread: the old master's node is gone
        await asyncio.sleep(0.05)
        state.release.set()
        deadline = time.monotonic() + 5
        while election.role is not Role.ACTIVE and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        election.stop()
        worker.close()
        return roles, state.calls

    roles, calls = asyncio.run(run())
    assert roles == [Role.STANDBY, Role.ACTIVE] and calls == 2
