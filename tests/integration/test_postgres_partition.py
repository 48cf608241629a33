"""The PostgreSQL insert bolt across a real network partition: packets silently dropped, no FIN,
no RST (a host gone, a cut link), as tests/unit/connectors/postgres/test_faults.py does a frozen
and a reset server.

PostgreSQL runs in a network namespace of its own (tests/postgres_server.py with ``netns``); the
bolt runs in a subprocess in the same namespace (``ip netns exec``), driven call by call with the
connector harness, and reports to the test as JSON lines while the test cuts and heals the link
with iptables DROP rules on the server's port (loopback packets pass INPUT and OUTPUT). Two ways
a batch is caught in flight, one per kernel mechanism of ``postgres.tcp.timeout.ms``:

- awaiting-reply: the batch's COPY waits on a table lock held by another connection, so the bolt
  waits for the server's reply with nothing unacknowledged (by default only keepalives, off for
  2 h, would notice): the partition starts then and the keepalives end it;
- unacknowledged: the partition starts while the connection is idle and the batch's data then
  goes unanswered (by default ~15 min of retransmissions): tcp_user_timeout ends it.

Expected with the option: the call returns within 2x the timeout with the batch failed (nothing
acked while partitioned) and one connection-error line; after the link heals the replay is
written and acked and the table holds every row. Without it (0: the OS defaults) the call is
still blocked after that bound, and completes once the link heals and the lock is released.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.postgres.config import insert_config
from tests.foreign import Foreign, Ours
from tests.netns import blackhole, heal, network_namespace
from tests.postgres_server import PostgresServer, postgres_or_skip

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 3000
BOUND_S = 2 * TIMEOUT_MS / 1000  # the liveness bound: a partition ends the call within it
W = "postgres insert bolt 'p'"

# The client, in the namespace. argv: url, table, postgres.tcp.timeout.ms, mode, how long to wait
# for the blocked call. stdin: "partitioned" / "healed" when the test has cut / healed the link.
CLIENT = r"""
import json, sys, threading, time
import psycopg
from heron_py.connectors.postgres import PostgresInsertBolt
from tests import connector_support
from tests.connector_support import Clock, tup

url, table, timeout_ms, mode, wait_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], float(sys.argv[5])

def say(**kw):
    print(json.dumps(kw), flush=True)

def told(word):
    line = sys.stdin.readline().strip()
    assert line == word, (line, word)

def state(**kw):
    return dict(acked=sorted(int(t.id) for t in d.acked), failed=sorted(int(t.id) for t in d.failed),
                lines=[m for m, _ in d.lines], **kw)

admin = psycopg.connect(url, autocommit=True)  # idle while partitioned: its connection survives
admin.execute(f"DROP TABLE IF EXISTS {table}")
admin.execute(f"CREATE TABLE {table} (id text, value text)")
holder = psycopg.connect(url)  # holds the table lock in the awaiting-reply mode
clock = Clock()
ctx = connector_support.Context("sink", 7, inputs={"src": ["id", "value"]})
b, d = connector_support.make(PostgresInsertBolt, {"postgres.url": url, "postgres.table": table,
                                                   "postgres.batch.size": 5, "postgres.tcp.timeout.ms": timeout_ms},
                              clock, ctx)
b.process(tup(100, ["100", "v100"]))
b.loop.drain()  # connected, one row committed
params = b.connection.info.get_parameters()
batch = [tup(i, [str(i), f"v{i}"]) for i in range(5)]
writer = threading.Thread(target=lambda: [b.process(t) for t in batch], daemon=True)
if mode == "awaiting-reply":
    holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    writer.start()  # the fifth input fills the batch: its COPY waits for the lock
    while not admin.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                            "AND application_name = 'heron-py'").fetchone()[0]:
        time.sleep(0.02)
say(event="ready", params=params, **state())
told("partitioned")
cut = time.monotonic()
if mode == "unacknowledged":
    writer.start()  # the batch's data goes out to a silent peer
writer.join(wait_s)
say(event="partitioned", returned=not writer.is_alive(), after_s=round(time.monotonic() - cut, 2), **state())
told("healed")
holder.rollback()  # the lock released: a call still waiting gets its reply now
writer.join(60)
returned = not writer.is_alive()
if d.failed:
    clock.t += 0.2  # past the backoff (0.1 s)
    for t in batch:  # the spout's replays
        b.process(t)
m = ctx.metrics["postgres"].get_value_and_reset()
rows = sorted(r[0] for r in admin.execute(f"SELECT value FROM {table}").fetchall())
say(event="healed", returned=returned, rows=rows, metrics=m, **state())
b.cleanup()
"""


@pytest.fixture(scope="module")
def netns_pg() -> Iterator[tuple[str, PostgresServer]]:
    """A network namespace with its loopback up and a PostgreSQL server inside; the server is
    stopped (pg_ctl under ip netns exec) and the namespace deleted, with its rules, afterwards."""
    with network_namespace("hpypg") as ns:
        server = postgres_or_skip(netns=ns)  # the other PostgreSQL tests' skips (binaries, psycopg)
        try:
            yield ns, server
        finally:
            server.destroy()


class Client:
    """The client subprocess: its JSON lines (read by a thread, so a hung client fails the test
    at a deadline instead of hanging it) and its stdin."""

    def __init__(self, ns: str, server: PostgresServer, table: str, timeout_ms: int, mode: str) -> None:
        wait_s = str(BOUND_S + 1)  # past the bound: an unbounded call is still blocked then
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-c", CLIENT, server.url, table, str(timeout_ms), mode, wait_s],
            cwd=ROOT, text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout or ():
            self.lines.put(line)
        self.lines.put(None)  # the client exited

    def read(self, event: str, timeout: float = 60) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            line = None
        if line is None:
            self.close()
            raise AssertionError(f"no '{event}' from the client: {self.proc.stderr.read() if self.proc.stderr else ''}")
        got: dict[str, Any] = json.loads(line)
        assert got["event"] == event, got
        return got

    def tell(self, word: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


@contextmanager
def client(ns: str, server: PostgresServer, table: str, timeout_ms: int, mode: str) -> Iterator[Client]:
    """The client, and the partition's rules removed afterwards even when the test fails."""
    c = Client(ns, server, table, timeout_ms, mode)
    try:
        yield c
    finally:
        c.close()
        heal(ns, server.port)


def test_the_option_is_read_once_and_validated():
    s = insert_config({"postgres.table": "t"}, W).server
    assert s.tcp_timeout_ms == 30000
    assert s.tcp_options() == {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 3,
                               "keepalives_count": 3, "tcp_user_timeout": 30000}
    s = insert_config({"postgres.table": "t", "postgres.tcp.timeout.ms": "3000"}, W).server
    assert s.tcp_options() == {"keepalives": 1, "keepalives_idle": 1, "keepalives_interval": 1,
                               "keepalives_count": 3, "tcp_user_timeout": 3000}
    assert insert_config({"postgres.table": "t", "postgres.tcp.timeout.ms": 0}, W).server.tcp_options() == {}
    for bad, expected in ((-1, "an integer >= 0"), ("3s", "an integer >= 0"), (True, "an integer >= 0"),
                          (2**31, "an integer from 0 to 2147483647")):
        with pytest.raises(ConnectorConfigError) as e:
            insert_config({"postgres.table": "t", "postgres.tcp.timeout.ms": bad}, W)
        assert str(e.value) == f"{W}: config postgres.tcp.timeout.ms: expected {expected}, found {bad!r}"


TCP_PARAMS = ("keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout")
# libpq's words for the socket error: ETIMEDOUT once the kernel gives up on the silent peer
ROWS = ["v0", "v1", "v100", "v2", "v3", "v4"]


def _lines(port: int) -> tuple[Ours, str]:
    """The bolt's connection-error line for the partition, and its line once the server is back."""
    prefix = f"postgres insert bolt 'sink' task 7: postgresql server postgresql://127.0.0.1:{port}/postgres"
    # libpq words a dead peer as its OS error, or as "connection socket closed" when its read
    # notices first (CI saw both): the type is asserted, the library's words are not
    return (Ours(f"{prefix} unreachable (", Foreign("OperationalError"), "); retrying with backoff (up to 5 s)"),
            f"{prefix} reachable again")


@pytest.mark.parametrize("mode", ["awaiting-reply", "unacknowledged"])
def test_a_partition_fails_the_batch_within_the_tcp_timeout_and_its_replay_is_written(netns_pg, mode):
    ns, server = netns_pg
    unreachable, reachable = _lines(server.port)
    with client(ns, server, f"part_{mode.replace('-', '_')}", TIMEOUT_MS, mode) as c:
        ready = c.read("ready")
        # what libpq was given: the live connection's non-default parameters
        assert {k: ready["params"].get(k) for k in TCP_PARAMS} == dict(zip(TCP_PARAMS, ["1", "1", "1", "3", "3000"],
                                                                           strict=True))
        assert (ready["acked"], ready["failed"]) == ([100], [])
        blackhole(ns, server.port)
        c.tell("partitioned")
        cut = c.read("partitioned")
        print(f"{mode}: the batch failed {cut['after_s']} s after the partition (postgres.tcp.timeout.ms "
              f"{TIMEOUT_MS})")
        assert cut["returned"] and cut["after_s"] < BOUND_S, cut  # liveness: bounded, not hung
        assert (cut["acked"], cut["failed"]) == ([100], list(range(5))), cut  # nothing acked while cut off
        assert cut["lines"] == [unreachable]
        heal(ns, server.port)
        c.tell("healed")
        healed = c.read("healed")
    assert healed["returned"]
    # the replay written and acked; the failed attempt acked nothing and left no row
    assert (healed["acked"], healed["failed"]) == ([*range(5), 100], list(range(5))), healed
    assert healed["lines"] == [unreachable, reachable]
    assert (healed["metrics"]["connection-errors"], healed["metrics"]["written"]) == (1, 6)
    assert set(healed["rows"]) == set(ROWS), healed["rows"]  # every row, at least once


def test_without_the_option_a_partition_holds_the_call_until_it_heals(netns_pg):
    """The contrast: ``postgres.tcp.timeout.ms: 0`` leaves the OS defaults (keepalives off), so
    the call waiting for the server's reply is still blocked past the bound; it completes once
    the link heals and the lock is released, with nothing failed."""
    ns, server = netns_pg
    with client(ns, server, "part_no_timeout", 0, "awaiting-reply") as c:
        ready = c.read("ready")
        assert {k: ready["params"].get(k) for k in TCP_PARAMS} == dict.fromkeys(TCP_PARAMS)
        blackhole(ns, server.port)
        c.tell("partitioned")
        cut = c.read("partitioned")
        assert not cut["returned"] and cut["after_s"] >= BOUND_S, cut
        assert (cut["acked"], cut["failed"], cut["lines"]) == ([100], [], []), cut
        heal(ns, server.port)
        c.tell("healed")
        healed = c.read("healed")
    assert healed["returned"]
    assert (healed["acked"], healed["failed"], healed["lines"]) == ([*range(5), 100], [], []), healed
    assert healed["rows"] == ROWS
