"""The PostgreSQL insert bolt against a real server that is frozen (SIGSTOP of the postmaster and
its backends, then SIGCONT: a hung server, its sockets open, no FIN or RST) or whose connection
is reset (``ss -K``) while it writes. What a user expects: no input is acked before its row is
committed, nothing is lost (every row inserted once the server is back; a reset batch is failed
and replayed), the outage after a reset is one line and a metric, and the bolt resumes once the
server does. A frozen server holds the write until it resumes (documented in
docs/connectors/postgres.md: libpq has no client-side timeout for a query in flight)."""

from __future__ import annotations

import threading
import time

import pytest

from heron_py.connectors.postgres import PostgresInsertBolt
from tests import connector_support
from tests.connector_support import Clock, tup
from tests.postgres_server import postgres_or_skip
from tests.server_faults import can_reset_connections


@pytest.fixture(scope="module")
def server():
    s = postgres_or_skip()
    yield s
    s.thaw()  # never leave it stopped: pg_ctl stop would wait for it
    s.destroy()


def bolt(server, table: str, clock: Clock):
    server.execute(f"DROP TABLE IF EXISTS {table}")
    server.execute(f"CREATE TABLE {table} (id text, value text)")
    ctx = connector_support.Context("sink", 7, inputs={"src": ["id", "value"]})
    b, d = connector_support.make(PostgresInsertBolt, {"postgres.url": server.url, "postgres.table": table,
                                                       "postgres.batch.size": 5}, clock, ctx)
    return b, d, ctx


def test_a_batch_written_to_a_frozen_server_is_acked_only_after_its_commit(server):
    b, d, _ctx = bolt(server, "frozen_out", Clock())
    b.process(tup(100, ["100", "v100"]))
    b.loop.drain()  # connected, one row committed
    assert [int(t.id) for t in d.acked] == [100]
    d.acked.clear()
    writer = threading.Thread(target=lambda: [b.process(tup(i, [str(i), f"v{i}"])) for i in range(5)], daemon=True)
    with server.frozen():
        writer.start()  # the fifth input fills the batch: its COPY waits for the frozen server
        time.sleep(2)
        assert writer.is_alive()  # waiting: what it would do for a hung server (no client-side timeout)
        assert d.acked == [] and d.failed == []  # nothing acked that is not committed
    writer.join(30)
    assert not writer.is_alive()  # resumed with the server
    assert sorted(int(t.id) for t in d.acked) == list(range(5))
    assert d.failed == []
    assert sorted(r[0] for r in server.execute("SELECT value FROM frozen_out")) == \
        sorted(["v100", *(f"v{i}" for i in range(5))])
    b.cleanup()


def test_a_reset_connection_fails_the_batch_and_its_replay_is_written(server):
    why = can_reset_connections()
    if why:
        pytest.skip(why)
    clock = Clock()
    b, d, ctx = bolt(server, "reset_out", clock)
    b.process(tup(100, ["100", "v100"]))
    b.loop.drain()
    assert server.reset_connections() >= 1
    for i in range(5):
        b.process(tup(i, [str(i), f"v{i}"]))  # the batch meets the dead connection
    if not d.failed:
        pytest.skip("ss -K could not destroy the socket on this kernel (CONFIG_INET_DIAG_DESTROY)")
    assert sorted(int(t.id) for t in d.failed) == list(range(5))
    assert [int(t.id) for t in d.acked] == [100]  # none of the failed batch acked
    line = [m for m, _ in d.lines][-1]
    assert line.startswith(f"{b.where}: postgresql server {b.address} unreachable (OperationalError: ")
    assert line.endswith("); retrying with backoff (up to 5 s)")
    clock.t += 0.2  # past the backoff
    for i in range(5):  # the spout's replays
        b.process(tup(i, [str(i), f"v{i}"]))
    assert sorted(int(t.id) for t in d.acked) == [*range(5), 100]
    assert [m for m, _ in d.lines][-1] == f"{b.where}: postgresql server {b.address} reachable again"
    m = ctx.metrics["postgres"].get_value_and_reset()
    assert (m["connection-errors"], m["failed"], m["written"]) == (1, 5, 6)
    assert sorted(r[0] for r in server.execute("SELECT value FROM reset_out")) == \
        sorted(["v100", *(f"v{i}" for i in range(5))])  # the failed batch's transaction left no row
    b.cleanup()
