"""The RabbitMQSpout's messages/s against a bare pika consumer loop, on the same RabbitMQ node
and the same kind of queue (issue 38's goal: >= 0.7x). The lead runs it:

    .venv/bin/python bench/rabbitmq_bench.py [--messages 100000]

It fills two durable queues with the same persistent messages (one transaction per 1000), times
a bare loop (basic_consume with prefetch 5000 and manual acks, one basic_ack per message: what
the spout does) until it acked every message of the first queue, then runs a topology
RabbitMQSpout (par 1, ATLEAST_ONCE, prefetch = max spout pending 5000, so each message is acked
on its tuple's ack) -> a counting bolt on the local scheduler on the second queue, and times from
the first message taken until the queue has none ready and none unacknowledged (submit and start
are not counted; the last check is rabbitmqctl's, which adds up to ~1 s: with 100,000 messages
that is a few percent against the spout)."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from connector_common import topology_head  # noqa: E402

from tests.rabbitmq_server import RabbitMQServer  # noqa: E402

TOPOLOGY = topology_head("from heron_py.connectors.rabbitmq import RabbitMQSpout") + '''
b = TopologyBuilder("rabbitmq_bench")
spout = b.add_spout("rabbitmq", RabbitMQSpout, par=1, config={"rabbitmq.url": sys.argv[1],
                                                              "rabbitmq.queue": "bench-spout"})
b.add_bolt("count", Count, par=1, inputs={spout: Grouping.SHUFFLE})
b.set_config({"topology.stmgrs": 1, "topology.reliability.mode": "ATLEAST_ONCE",
              "topology.max.spout.pending": 5000})
b.build_and_submit()
'''


def fill(server: RabbitMQServer, queue: str, n: int) -> None:
    import pika

    c = server.connection()
    ch = c.channel()
    ch.queue_declare(queue, durable=True)
    ch.tx_select()
    payload = "x" * 80
    props = pika.BasicProperties(delivery_mode=2)
    for i in range(n):
        ch.basic_publish("", queue, f"message {i} {payload}".encode(), props)
        if i % 1000 == 999:
            ch.tx_commit()
    ch.tx_commit()
    c.close()


def bare(server: RabbitMQServer, n: int) -> float:
    c = server.connection()
    ch = c.channel()
    ch.basic_qos(prefetch_count=5000)
    got = [0]
    t0 = [0.0]

    def on_message(channel: Any, method: Any, _props: Any, body: bytes) -> None:
        if not got[0]:
            t0[0] = time.perf_counter()
        body.decode("utf-8")
        channel.basic_ack(method.delivery_tag)
        got[0] += 1

    ch.basic_consume("bench-bare", on_message, auto_ack=False)
    while got[0] < n:
        c.process_data_events(time_limit=0.01)
    rate = (n - 1) / (time.perf_counter() - t0[0])
    c.close()
    return rate


def spout(server: RabbitMQServer, home: Path, n: int) -> float:
    from heron_py.testing import run_local
    from heron_py.testing.local import kill_local

    c = server.connection()
    ch = c.channel()

    def ready() -> int:
        return int(ch.queue_declare("bench-spout", passive=True).method.message_count)

    f = home / "rabbitmq_bench_topology.py"
    f.write_text(TOPOLOGY)
    run = run_local(f, [server.url], home=home, name="rabbitmq_bench", keep_running=True)
    try:
        while ready() == n:  # the first delivery starts the clock (the prefetch takes up to 5000 at once)
            time.sleep(0.005)
        t0 = time.perf_counter()
        while ready() > 0:
            time.sleep(0.02)
        while server.depth("bench-spout") != (0, 0):
            pass
        return n / (time.perf_counter() - t0)
    finally:
        c.close()
        kill_local(home, run.name)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="rabbitmq_bench"))
    server = RabbitMQServer(home / "rabbitmq")
    try:
        fill(server, "bench-bare", args.messages)
        fill(server, "bench-spout", args.messages)
        b = bare(server, args.messages)
        s = spout(server, home, args.messages)
        print(f"| messages | bare pika consumer, manual acks (messages/s) | RabbitMQSpout at least once "
              f"(messages/s) | ratio |\n|---|---|---|---|\n| {args.messages} | {b:,.0f} | {s:,.0f} | {s / b:.2f}x |")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
