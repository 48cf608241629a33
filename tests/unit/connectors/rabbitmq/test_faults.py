"""The RabbitMQ connectors against a real broker that is frozen (SIGSTOP of its Erlang VM, then
SIGCONT: a hung broker, its sockets open, no FIN or RST) or whose connections are reset
(``ss -K``) while they run in process. What a user expects: no call of the task's thread hangs
past ``rabbitmq.timeout.ms`` (a connection attempt: twice it), the outage is one line and a
metric, nothing is lost (every message emitted at least once and the queue ends with 0 ready and
0 unacked; every input published before it is acked), and the connector resumes once the broker
does."""

from __future__ import annotations

import time
from typing import Any

import pytest

from heron_py.connectors.rabbitmq import RabbitMQBolt, RabbitMQSpout
from tests import connector_support
from tests.connector_support import Clock, Delegate, tup
from tests.rabbitmq_server import rabbitmq_or_skip
from tests.server_faults import can_reset_connections


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = rabbitmq_or_skip(tmp_path_factory.mktemp("rabbitmq-faults"))
    yield s
    s.thaw()  # never leave it stopped: rabbitmqctl stop would wait for it
    s.stop()


def fresh(server: Any, queue: str) -> None:
    c = server.connection()
    ch = c.channel()
    ch.queue_delete(queue)
    ch.queue_declare(queue, durable=True)
    c.close()


def publish(server: Any, queue: str, bodies: list[str]) -> None:
    import pika

    c = server.connection()
    ch = c.channel()
    ch.confirm_delivery()
    for b in bodies:
        ch.basic_publish("", queue, b.encode(), pika.BasicProperties(delivery_mode=2))
    c.close()


def drain(server: Any, queue: str) -> list[str]:
    c = server.connection()
    ch = c.channel()
    out = []
    while True:
        m, _p, body = ch.basic_get(queue, auto_ack=True)
        if m is None:
            break
        out.append(body.decode())
    c.close()
    return out


def lines(d: Delegate) -> list[str]:
    return [m for m, _level in d.lines]


def run_spout(server: Any, fault: Any, queue: str, n: int = 300, **conf: Any) -> tuple[RabbitMQSpout, set[str],
                                                                                       list[str]]:
    """The spout on the real clock, acking what it emits, over ``n`` messages published before;
    ``fault(spout, delegate)`` runs once a third of them was emitted; ends when all were emitted and
    the queue holds nothing ready or unacked."""
    fresh(server, queue)
    publish(server, queue, [f"v{i}" for i in range(n)])
    s, d = connector_support.make(RabbitMQSpout, {"rabbitmq.url": server.url, "rabbitmq.queue": queue,
                                                  "rabbitmq.prefetch": 20, "rabbitmq.timeout.ms": 1000,
                                                  "rabbitmq.reconnect.max.ms": 500, **conf},
                                  time.monotonic, connector_support.Context("rabbit"))
    def finished() -> bool:
        if server.depth(queue) == (0, 0):
            return True
        time.sleep(0.2)
        return False

    try:
        seen: set[str] = connector_support.ack_all_until(s, d, n, lambda: fault(s, d), finished)
    finally:
        server.thaw()
    s.close()
    return s, seen, lines(d)


def test_the_spout_rides_out_a_freeze_without_a_hung_thread_or_a_lost_message(server):
    observed: list[str] = []

    def freeze(s: RabbitMQSpout, d: Delegate) -> None:
        with server.frozen():
            until = time.monotonic() + 6
            while time.monotonic() < until:  # the spout's loop keeps returning while the broker is frozen
                s.next_tuple()
                s.heron_poll()
            observed.extend(lines(d))

    s, seen, _log = run_spout(server, freeze, "in-freeze")
    assert seen == {f"v{i}" for i in range(300)}
    assert server.depth("in-freeze") == (0, 0)
    # the lag's queue.declare is not waited for: the loop ran, and said why the broker is silent
    stall = (f"{s.where}: rabbitmq server {s.address} has not answered for 1 s (a passive queue.declare of queue "
             f"'in-freeze'); waiting for it, the heartbeat check (rabbitmq.heartbeat.secs 60) closes a dead "
             f"connection")
    assert stall in observed
    m = s.metrics_snapshot()
    assert m["stalls"] == 1
    assert m["connection-errors"] == 0  # a freeze shorter than the heartbeat timeout: the connection is kept


def test_the_spout_reconnects_after_its_connection_is_reset(server):
    why = can_reset_connections()
    if why:
        pytest.skip(why)
    s, seen, log = run_spout(server, lambda _s, _d: server.reset_connections(), "in-reset")
    assert seen == {f"v{i}" for i in range(300)}  # the broker redelivered what the lost connection held
    assert server.depth("in-reset") == (0, 0)
    if not any("unreachable" in line for line in log):
        pytest.skip("ss -K could not destroy the socket on this kernel (CONFIG_INET_DIAG_DESTROY)")
    assert any(line.startswith(f"{s.where}: rabbitmq server {s.address} unreachable (StreamLostError: ")
               for line in log)
    assert f"{s.where}: rabbitmq server {s.address} reachable again" in log


def test_the_bolt_fails_its_batch_and_gives_up_on_a_frozen_broker_then_publishes_everything(server):
    """Before: the confirm timeout was followed by AMQP's closing handshake, which waited for the
    frozen broker for the whole freeze; and a connection attempt to it raised pika's
    AMQPConnectorStackTimeout out of the bolt (not an AMQPError: taken for a bug)."""
    fresh(server, "out")
    ctx = connector_support.Context("sink", 7, inputs={"src": ["id", "value"]})
    clock = Clock()
    b, d = connector_support.make(RabbitMQBolt, {"rabbitmq.url": server.url, "rabbitmq.routing.key": "out",
                                                 "rabbitmq.body.field": "value", "rabbitmq.batch.size": 5,
                                                 "rabbitmq.timeout.ms": 1000}, clock, ctx)
    b.process(tup(100, ["100", "v100"]))
    b.loop.drain()  # connected, one message published and confirmed
    assert [int(t.id) for t in d.acked] == [100]
    d.acked.clear()
    b.clock = time.monotonic  # the confirm wait counts real time
    try:
        with server.frozen():
            for i in range(5):
                b.process(tup(i, [str(i), f"v{i}"]))  # published; no confirm comes
            assert d.acked == []
            assert sorted(int(t.id) for t in d.failed) == list(range(5))
            assert lines(d)[-1] == (f"{b.where}: rabbitmq server {b.address} unreachable (TimeoutError: 5 publisher "
                                    f"confirms not received within 1 s); retrying with backoff (up to 5 s)")
            assert b.connection is None  # given up at once, no closing handshake with the frozen broker
            b.conn.next_try = 0.0
            d.failed.clear()
            b.process(tup(0, ["0", "v0"]))
            b.loop.drain()  # a connection attempt: the handshake times out (2 x rabbitmq.timeout.ms)
            assert [int(t.id) for t in d.failed] == [0]
            assert lines(d)[-1] == (f"{b.where}: rabbitmq server {b.address} unreachable (AMQPConnectorStackTimeout: "
                                    f"timeout during the AMQP handshake); retrying with backoff (up to 5 s)")
    finally:
        b.clock = clock
    clock.t += 10  # past the backoff
    for i in range(5):  # the spout's replays
        b.process(tup(i, [str(i), f"v{i}"]))
    assert sorted(int(t.id) for t in d.acked) == list(range(5))
    assert lines(d)[-1] == f"{b.where}: rabbitmq server {b.address} reachable again"
    assert ctx.metrics["rabbitmq"].get_value_and_reset()["connection-errors"] == 2
    b.cleanup()
    # at least once: the messages the frozen broker received before it was given up on are kept
    got = drain(server, "out")
    assert set(got) == {"v100", *(f"v{i}" for i in range(5))}
    assert server.depth("out") == (0, 0)
