"""The Redis connectors against a real redis-server that is frozen (SIGSTOP, then SIGCONT: a
hung server, its sockets open, no FIN or RST) or whose connections are reset (``ss -K``) while
they run in process. What a user expects: no thread hangs past ``redis.timeout.ms``, the outage
is one line and a metric, nothing is lost (every entry emitted at least once, the group's pending
list empties; every input written before it is acked), and the connector resumes once the
server does."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.redis import RedisStreamBolt, RedisStreamSpout
from heron_py.connectors.redis.config import stream_spout_config
from tests import connector_support
from tests.connector_support import Clock, Delegate, tup
from tests.foreign import Foreign, Ours
from tests.server_faults import can_reset_connections


class Context(connector_support.Context):
    def __init__(self, comp: str = "redis", task: int = 3, inputs: dict[str, list[str]] | None = None) -> None:
        super().__init__(comp, task, inputs)


def spout(server: Any, clock: Any, **conf: Any) -> tuple[RedisStreamSpout, Delegate]:
    base = {"redis.url": server.url, "redis.stream": "s", "redis.group": "g", "redis.block.ms": 0}
    return connector_support.make(RedisStreamSpout, {**base, **conf}, clock, Context())


def unreachable(s: Any, error_type: str, backoff: str = "5") -> Ours:
    """Our line, with redis-py's own words for the error (they change between its releases)."""
    return Ours(f"{s.where}: redis server {s.address} unreachable (", Foreign(error_type),
                f"); retrying with backoff (up to {backoff} s)")


def lines(d: Delegate) -> list[str]:
    return [m for m, _level in d.lines]


def test_block_ms_at_or_over_the_socket_timeout_is_one_line():
    # an idle stream's read waits redis.block.ms for the answer: past redis.timeout.ms every such
    # read failed as if the server were unreachable (found by this file's first runs)
    with pytest.raises(ConnectorConfigError) as e:
        stream_spout_config({"redis.stream": "s", "redis.block.ms": 3000, "redis.timeout.ms": 1000}, "r", "g", "c")
    assert str(e.value) == "r: config redis.block.ms: expected an integer below redis.timeout.ms (1000), found 3000"
    assert stream_spout_config({"redis.stream": "s", "redis.block.ms": 999, "redis.timeout.ms": 1000},
                               "r", "g", "c").block_ms == 999


def test_a_read_lost_in_a_freeze_is_emitted_at_the_reconnect_not_after_the_claim_idle_time(server, r):
    """The read sent to the frozen server times out; the server runs it when it resumes and hands
    the entries to this consumer, whose reply is gone with the connection. The spout reads its
    own pending list again at the reconnect instead of waiting redis.claim.idle.ms (60 s here)."""
    r.xgroup_create("s", "g", id="0", mkstream=True)
    clock = Clock()
    s, d = spout(server, clock, **{"redis.timeout.ms": 500, "redis.claim.idle.ms": 60_000})
    s.next_tuple()  # nothing yet
    ids = [r.xadd("s", {"value": f"v{i}"}).decode() for i in range(3)]
    with server.frozen():
        s.next_tuple()  # the read goes to the frozen server: a timeout, not a hang
        assert lines(d)[-1] == unreachable(s, "TimeoutError")
    deadline = time.monotonic() + 10
    while r.xpending("s", "g")["pending"] < 3 and time.monotonic() < deadline:
        time.sleep(0.02)  # the resumed server runs the read it held: the entries are ours now
    assert d.emitted == []
    clock.t += 0.2  # past the reconnect backoff
    for _ in range(3):
        s.next_tuple()
    assert [v[0] for v, _tid in d.emitted] == ids  # each once
    assert lines(d)[-2:] == [f"{s.where}: redis server {s.address} reachable again",
                             f"{s.where}: re-emitted 3 entries of consumer 'redis-3' whose read was lost with "
                             f"its connection"]
    m = s.metrics_snapshot()
    assert (m["connection-errors"], m["reconnects"], m["claimed"]) == (1, 1, 0)
    for _v, tid in d.emitted:
        s.ack(tid)
    s.next_tuple()
    assert r.xpending("s", "g")["pending"] == 0
    s.close()


def run_spout(server: Any, r: Any, fault: Any, n: int = 400, **conf: Any) -> tuple[RedisStreamSpout, Delegate,
                                                                                       set[str], list[str]]:
    """The spout on the real clock, acking everything it emits, while a producer XADDs ``n``
    entries; ``fault(log)`` runs once a third of them was emitted; the set of values emitted."""
    r.xgroup_create("s", "g", id="0", mkstream=True)
    s, d = spout(server, time.monotonic, **{"redis.timeout.ms": 500, "redis.claim.idle.ms": 60_000,
                                             "redis.reconnect.max.ms": 500, **conf})

    def produce() -> None:
        c = server.client()
        for i in range(n):
            while True:
                try:
                    c.xadd("s", {"value": f"v{i}"})
                    break
                except Exception:  # the server is frozen: the producer waits too
                    time.sleep(0.05)
            time.sleep(0.002)

    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    def finished() -> bool:  # every entry XADDed, and every XACK in (the last ones at the last loop)
        return not producer.is_alive() and r.xpending("s", "g")["pending"] == 0

    try:
        seen: set[str] = connector_support.ack_all_until(s, d, n, lambda: fault(lines(d)), finished)
    finally:
        server.thaw()
        producer.join(30)
    return s, d, seen, lines(d)


def test_the_spout_rides_out_a_freeze_without_losing_an_entry(server, r):
    def freeze(log: list[str]) -> None:
        # frozen for 6 s in a thread of its own: the spout's loop keeps running meanwhile
        server.freeze()
        threading.Timer(6.0, server.thaw).start()

    s, _d, seen, log = run_spout(server, r, freeze)
    errors = [m for m in log if "unreachable" in m]
    assert seen == {f"v{i}" for i in range(400)}  # every entry, at least once
    assert r.xpending("s", "g")["pending"] == 0  # and acknowledged
    # the loop returned while the server was frozen (a timeout each redis.timeout.ms, no hang)
    assert errors and errors[0] == unreachable(s, "TimeoutError", "0.5")
    assert f"{s.where}: redis server {s.address} reachable again" in log
    m = s.metrics_snapshot()
    assert m["connection-errors"] >= 1 and m["reconnects"] == 1
    s.close()


def test_the_spout_reconnects_after_its_connections_are_reset(server, r):
    why = can_reset_connections()
    if why:
        pytest.skip(why)
    killed: list[int] = []
    s, _d, seen, log = run_spout(server, r, lambda _log: killed.append(server.reset_connections()))
    assert killed[0] >= 1
    assert seen == {f"v{i}" for i in range(400)}
    assert r.xpending("s", "g")["pending"] == 0
    m = s.metrics_snapshot()
    if m["connection-errors"] == 0:
        pytest.skip("ss -K could not destroy the sockets on this kernel (CONFIG_INET_DIAG_DESTROY)")
    assert m["reconnects"] == 1
    assert any(line.startswith(f"{s.where}: redis server {s.address} unreachable (ConnectionError: ") for line in log)
    s.close()


def test_a_sink_acks_nothing_while_the_server_is_frozen_and_writes_everything_after(server, r):
    ctx = Context("sink", 7, inputs={"src": ["id", "value"]})
    clock = Clock()
    b, d = connector_support.make(RedisStreamBolt, {"redis.url": server.url, "redis.stream": "out",
                                                    "redis.fields": ["value"], "redis.batch.size": 5,
                                                    "redis.timeout.ms": 500}, clock, ctx)
    with server.frozen():
        for i in range(5):
            b.process(tup(i, [str(i), f"v{i}"]))  # the batch is full: written to the frozen server
        assert d.acked == []  # nothing acked that the server did not confirm
        assert sorted(int(t.id) for t in d.failed) == list(range(5))  # failed after the timeout: replayed
        assert [m for m, _ in d.lines][-1] == unreachable(b, "TimeoutError")
    clock.t += 0.2  # past the backoff
    for i in range(5):  # the spout's replays
        b.process(tup(i, [str(i), f"v{i}"]))
    assert sorted(int(t.id) for t in d.acked) == list(range(5))
    # at least once: the XADDs the frozen server held ran when it resumed, so some may be there twice
    assert {f[b"value"].decode() for _id, f in r.xrange("out")} == {f"v{i}" for i in range(5)}
    b.cleanup()
