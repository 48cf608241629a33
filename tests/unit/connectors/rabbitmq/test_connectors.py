"""The RabbitMQ connectors driven call by call against a real RabbitMQ node (no topology): the
spout's prefetch, acks, nacks with requeue after a backoff, malformed messages; the bolt's
publishes with confirms and its refusals; every error line verbatim (options, broker unreachable
with backoff and metrics, wrong credentials, unknown queue and exchange). The component host is
a small harness recording emits, acks and log lines; the broker is real."""

from __future__ import annotations

from typing import Any

import pytest

from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.rabbitmq import RabbitMQBolt, RabbitMQSpout
from heron_py.connectors.rabbitmq.config import bolt_config, spout_config
from heron_py.connectors.rabbitmq.errors import reason
from heron_py.connectors.rabbitmq.spout import decode_body
from tests import connector_support
from tests.connector_support import Clock, Context, Delegate, tup
from tests.rabbitmq_server import free_port, rabbitmq_or_skip
from tests.support import wait_for


def make(cls: Any, conf: dict[str, Any], clock: Clock, ctx: Context | None = None) -> tuple[Any, Delegate]:
    return connector_support.make(cls, conf, clock, ctx or Context())


# --- options (no broker) -----------------------------------------------------------------------
W = "rabbitmq spout 'r'"


@pytest.mark.parametrize("conf, line", [
    ({}, f"{W}: config rabbitmq.queue: expected the name of a queue, found None"),
    ({"rabbitmq.queue": "q", "rabbitmq.url": "http://h:1/"},
     f"{W}: config rabbitmq.url: expected amqp://user:password@host:port/vhost, found 'http://h:1/'"),
    ({"rabbitmq.queue": "q", "rabbitmq.url": "amqp://h:port/"},
     f"{W}: config rabbitmq.url: expected amqp://user:password@host:port/vhost, found 'amqp://h:port/'"),
    ({"rabbitmq.queue": "q", "rabbitmq.prefetch": 0},
     f"{W}: config rabbitmq.prefetch: expected an integer >= 1, found 0"),
    ({"rabbitmq.queue": "q", "rabbitmq.prefetch": 70000},
     f"{W}: config rabbitmq.prefetch: expected an integer from 1 to 65535, found 70000"),
    ({"rabbitmq.queue": "q", "rabbitmq.queue.declare": "maybe"},
     f"{W}: config rabbitmq.queue.declare: expected true or false, found 'maybe'"),
])
def test_spout_config_errors_verbatim(conf, line):
    with pytest.raises(ConnectorConfigError) as e:
        spout_config(conf, W)
    assert str(e.value) == line


def test_prefetch_is_the_spouts_max_pending_and_the_url_is_parsed():
    cfg = spout_config({"rabbitmq.queue": "q", "topology.max.spout.pending": 250,
                        "rabbitmq.url": "amqp://u:p%40ss@h:5673/v%2Fh"}, W)
    assert cfg.prefetch == 250
    assert (cfg.server.host, cfg.server.port, cfg.server.user, cfg.server.password, cfg.server.vhost) == \
        ("h", 5673, "u", "p@ss", "v/h")
    assert cfg.server.address() == "amqp://h:5673/v%2Fh"  # never the password
    assert spout_config({"rabbitmq.queue": "q"}, W).prefetch == 1000


@pytest.mark.parametrize("conf, line", [
    ({}, "rabbitmq bolt 'b': config rabbitmq.routing.key / rabbitmq.routing.key.field: expected exactly one of "
         "them, found {'rabbitmq.routing.key': None, 'rabbitmq.routing.key.field': None}"),
    ({"rabbitmq.routing.key": "k", "rabbitmq.exchange": "x", "rabbitmq.queue.declare": True},
     "rabbitmq bolt 'b': config rabbitmq.queue.declare: expected false unless publishing to the default exchange "
     "with rabbitmq.routing.key (the queue's name), found True"),
    ({"rabbitmq.routing.key": "k", "rabbitmq.batch.size": "many"},
     "rabbitmq bolt 'b': config rabbitmq.batch.size: expected an integer >= 1, found 'many'"),
])
def test_bolt_config_errors_verbatim(conf, line):
    with pytest.raises(ConnectorConfigError) as e:
        bolt_config(conf, "rabbitmq bolt 'b'")
    assert str(e.value) == line


def test_decode_body_and_reason():
    assert decode_body(b"caf\xc3\xa9", True) == ("café", "")
    assert decode_body(b"\xff", True) == (None, "its body is not UTF-8 (invalid start byte at byte 0)")
    assert decode_body(b"\xff", False) == (b"\xff", "")
    wrapped = Exception(Exception(ConnectionRefusedError(111, "Connection refused")))
    assert reason(wrapped) == "ConnectionRefusedError: [Errno 111] Connection refused"


# --- against the broker ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = rabbitmq_or_skip(tmp_path_factory.mktemp("rabbitmq"))
    yield s
    s.stop()


@pytest.fixture
def channel(server):
    c = server.connection()
    yield c.channel()
    c.close()


_n = [0]


@pytest.fixture
def queue(channel) -> str:
    _n[0] += 1
    name = f"q{_n[0]}"
    channel.queue_declare(name, durable=True)
    return name


def publish(channel: Any, queue: str, *bodies: bytes) -> None:
    import pika

    for i, b in enumerate(bodies):
        channel.basic_publish("", queue, b, pika.BasicProperties(message_id=f"m{i}", delivery_mode=2))


def depth(channel: Any, queue: str) -> int:
    return int(channel.queue_declare(queue, passive=True).method.message_count)


def spout(server: Any, queue: str, clock: Clock, **conf: Any) -> tuple[RabbitMQSpout, Delegate]:
    return make(RabbitMQSpout, {"rabbitmq.url": server.url, "rabbitmq.queue": queue, **conf}, clock)


def pump(s: RabbitMQSpout, n: int = 5) -> None:
    for _ in range(n):
        s.next_tuple()


def test_spout_prefetch_acks_and_a_fail_nacked_with_requeue_after_the_backoff(server, channel, queue):
    clock = Clock()
    publish(channel, queue, b"a", b"b", b"c", b"d", b"e")
    s, d = spout(server, queue, clock, **{"topology.max.spout.pending": 2, "rabbitmq.retry.initial.delay.ms": 500})
    pump(s, 10)
    # the broker delivers only the prefetch (= max pending) until an ack
    assert [v for v, _ in d.emitted] == [["m0", "a"], ["m1", "b"]]
    s.ack(d.emitted[0][1])
    s.fail(d.emitted[1][1])
    pump(s, 10)
    assert [v for v, _ in d.emitted][2:] == [["m2", "c"]]  # b waits for its backoff, still held (unacked)
    clock.t += 0.5
    pump(s, 10)  # b nacked with requeue: the broker delivers it again (after the others)
    for _v, key in d.emitted[2:]:
        s.ack(key)
    pump(s, 10)
    for _v, key in d.emitted[3:]:
        s.ack(key)
    pump(s, 10)
    for _v, key in d.emitted[4:]:
        s.ack(key)
    pump(s, 10)
    assert sorted(v[1] for v, _ in d.emitted) == ["a", "b", "b", "c", "d", "e"]
    m = s.metrics_snapshot()
    assert (m["redelivered"], m["retries"], m["nacked"], m["failed"]) == (1, 1, 1, 1)
    s.close()
    assert depth(channel, queue) == 0  # every delivery acked


def test_heron_poll_keeps_the_connection_while_next_tuple_is_not_called(server, channel, queue):
    clock = Clock()
    s, d = spout(server, queue, clock)
    pump(s, 1)
    publish(channel, queue, b"later")
    clock.t += 2.0  # max pending reached: the host calls heron_poll only

    def polled() -> bool:
        s.heron_poll()
        return len(s.deliveries) == 1

    wait_for(polled, 5, "the delivery read by heron_poll", every=0.05)
    assert d.emitted == []  # taken off the socket, emitted by next_tuple
    pump(s, 1)
    assert [v for v, _ in d.emitted] == [["m0", "later"]]
    s.close()


def test_a_malformed_message_is_rejected_and_logged_once(server, channel, queue):
    import pika

    channel.basic_publish("", queue, b"\xff\xfeoops", pika.BasicProperties(message_id="bad-1"))
    publish(channel, queue, b"fine")
    s, d = spout(server, queue, Clock())
    pump(s, 10)
    assert [v for v, _ in d.emitted] == [["m0", "fine"]]
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        f"rabbitmq spout 'c' task 3: message bad-1 (delivery tag 1) of queue '{queue}' is malformed: its body is "
        f"not UTF-8 (invalid start byte at byte 0); rejected without requeue (not emitted)"]
    s.ack(d.emitted[0][1])
    pump(s, 3)
    s.close()
    assert depth(channel, queue) == 0


def test_max_retries_rejects_without_requeue(server, channel, queue):
    publish(channel, queue, b"x")
    clock = Clock()
    s, d = spout(server, queue, clock, **{"rabbitmq.max.retries": 0})
    pump(s, 5)
    s.fail(d.emitted[0][1])
    pump(s, 5)
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        f"rabbitmq spout 'c' task 3: message m0 of queue '{queue}' failed 1 times; rabbitmq.max.retries reached, "
        f"rejecting it without requeue"]
    s.close()
    assert depth(channel, queue) == 0


def test_unknown_queue_is_one_line_and_declare_makes_it(server):
    clock = Clock()
    s, d = spout(server, "nope", clock)
    pump(s, 1)
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        f"rabbitmq spout 'c' task 3: queue 'nope' does not exist on amqp://127.0.0.1:{server.port}/%2F; expected "
        f"it declared, or rabbitmq.queue.declare true; retrying with backoff (up to 5 s)"]
    s2, d2 = spout(server, "made-here", clock, **{"rabbitmq.queue.declare": True})
    pump(s2, 1)
    assert not [ln for ln, lvl in d2.lines if lvl == "error"] and s2.connection is not None
    s2.close()


def test_wrong_credentials_are_one_line(server):
    url = f"amqp://heron:wrong@127.0.0.1:{server.port}/%2F"
    s, d = make(RabbitMQSpout, {"rabbitmq.url": url, "rabbitmq.queue": "q"}, Clock())
    pump(s, 1)
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        f"rabbitmq spout 'c' task 3: rabbitmq server amqp://127.0.0.1:{server.port}/%2F refused the credentials "
        f"of user 'heron'; expected the user and password of rabbitmq.url or rabbitmq.user/rabbitmq.password; "
        f"retrying with backoff (up to 5 s)"]


def test_unreachable_broker_is_retried_with_backoff_and_counted():
    port = free_port()  # nothing listens there
    clock = Clock()
    s, d = make(RabbitMQSpout, {"rabbitmq.port": port, "rabbitmq.queue": "q"}, clock)
    line = (f"rabbitmq spout 'c' task 3: rabbitmq server amqp://127.0.0.1:{port}/%2F unreachable "
            f"(ConnectionRefusedError: [Errno 111] Connection refused); retrying with backoff (up to 5 s)")
    pump(s, 1)
    assert [ln for ln, _ in d.lines if "unreachable" in ln] == [line]
    pump(s, 5)  # within the backoff: no new attempt
    assert s.metrics_snapshot()["connection-errors"] == 1
    waits = []
    for _ in range(4):
        waits.append(round(s.conn.next_try - clock.t, 3))
        clock.t = s.conn.next_try
        pump(s, 1)
    assert waits == [0.1, 0.2, 0.4, 0.8]
    m = s.metrics_snapshot()
    assert (m["connection-errors"], m["connected"]) == (4, 0)
    assert len([ln for ln, _ in d.lines if "unreachable" in ln]) == 1  # the same line: once per 10 s


# --- the bolt -----------------------------------------------------------------------------------
def bolt(server: Any, conf: dict[str, Any], fields: list[str]) -> tuple[RabbitMQBolt, Delegate]:
    ctx = Context(comp="b", task=7, inputs={"src": fields})
    return make(RabbitMQBolt, {"rabbitmq.url": server.url, "rabbitmq.batch.size": 3, "rabbitmq.batch.delay.ms": 0,
                               **conf}, Clock(), ctx)


def test_bolt_publishes_with_confirms_and_acks_after_them(server, channel, queue):
    import json

    b, d = bolt(server, {"rabbitmq.routing.key": queue, "rabbitmq.message.id.field": "n"}, ["word", "n"])
    ins = [tup(i, [f"w{i}", i]) for i in range(3)]
    for t in ins[:2]:
        b.process(t)
    assert d.acked == []  # batched: not yet published
    b.process(ins[2])
    assert d.acked == ins and d.failed == []
    got = []
    for _ in range(3):
        _method, props, body = channel.basic_get(queue, auto_ack=True)
        got.append((props.message_id, json.loads(body), props.delivery_mode))
    assert got == [(str(i), {"word": f"w{i}", "n": i}, 2) for i in range(3)]
    b.cleanup()


def test_bolt_fails_an_unroutable_message_and_an_input_without_its_field(server, channel, queue):
    b, d = bolt(server, {"rabbitmq.routing.key.field": "rk", "rabbitmq.body.field": "body"}, ["rk", "body"])
    ok, lost, bad = tup(1, [queue, "hello"]), tup(2, ["no-such-queue", "x"]), tup(3, ["", "y"])
    for t in (ok, lost, bad):
        b.process(t)  # the bad input is failed at once: the batch holds two, published when due
    b.heron_poll()
    assert d.acked == [ok] and d.failed == [bad, lost]
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        "rabbitmq bolt 'b' task 7: input 3 from 'src' (['', 'y']): expected a routing key in field 'rk', found ''; "
        "failing it",
        "rabbitmq bolt 'b' task 7: input 2 from 'src' (['no-such-queue', 'x']): the broker returned it unroutable "
        "(exchange '', routing key 'no-such-queue'); failing it"]
    assert channel.basic_get(queue, auto_ack=True)[2] == b"hello"
    b.cleanup()


def test_bolt_unknown_exchange_is_one_line_and_its_inputs_fail(server):
    b, d = bolt(server, {"rabbitmq.routing.key": "k", "rabbitmq.exchange": "no-x", "rabbitmq.batch.size": 1},
                ["w"])
    t = tup(1, ["a"])
    b.process(t)
    assert d.failed == [t]
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        f"rabbitmq bolt 'b' task 7: exchange 'no-x' does not exist on amqp://127.0.0.1:{server.port}/%2F (NOT_FOUND - "
        f"no exchange 'no-x' in vhost '/'); expected it declared; retrying with backoff (up to 5 s)"]


def test_streamlet_source_and_sink_through_an_in_process_topology(server, channel, queue, caplog):
    import pika

    from heron_py.api.streamlet.builder import Builder
    from heron_py.api.streamlet.config import Config
    from heron_py.api.streamlet.runner import build_topology
    from heron_py.connectors.rabbitmq import RabbitMQGenerator, RabbitMQSink
    from heron_py.testing import run_in_process

    channel.queue_declare("st-out", durable=True)
    publish(channel, queue, *[f"a{i} b{i}".encode() for i in range(5)])
    channel.basic_publish("", queue, b"\xff", pika.BasicProperties(message_id="bad"))
    b = Builder()
    b.new_source(RabbitMQGenerator(server.url, queue)) \
        .flat_map(lambda line: line.split()).to_sink(RabbitMQSink(server.url, "st-out"))
    run_in_process(build_topology("t", Config(), b), idle_calls=50)
    got = []
    while True:
        method, _p, body = channel.basic_get("st-out", auto_ack=True)
        if method is None:
            break
        got.append(body.decode())
    assert sorted(got) == sorted([f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)])
    assert [rec.getMessage() for rec in caplog.records if "malformed" in rec.getMessage()] == [
        f"rabbitmq source task 1: message bad (delivery tag 6) of queue '{queue}' is malformed: its body is not "
        f"UTF-8 (invalid start byte at byte 0); skipped"]
