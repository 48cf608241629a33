"""Word count from a RabbitMQ queue to a RabbitMQ queue, at least once, on 2 containers.

    rabbitmq-server -detached          # or any broker; the example declares both queues
    python -c "import pika; c = pika.BlockingConnection(); ch = c.channel(); \\
      ch.queue_declare('lines', durable=True); \\
      [ch.basic_publish('', 'lines', f'the quick brown fox {i}', \\
        pika.BasicProperties(message_id=str(i), delivery_mode=2)) for i in range(1000)]"
    heron-py submit local examples/rabbitmq/rabbitmq_word_count.py -- \\
        --url amqp://guest:guest@127.0.0.1:5672/%2F --queue lines --out words
    rabbitmqctl list_queues name messages   # words: one message per word, JSON {"word", "id", "pos"}

``RabbitMQSpout`` consumes ``--queue`` with manual acks (prefetch = topology.max.spout.pending),
``split`` emits each word anchored to its line with (message id, position), and
``RabbitMQBolt`` publishes it to ``--out`` with publisher confirms: a line is acked to the broker
only when all its words were confirmed. A replay after a failure publishes some words again;
a reader de-duplicates by (id, pos): exact.
"""

import argparse
import sys
import time

from heron_py.connectors.rabbitmq import RabbitMQBolt, RabbitMQSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class SplitBolt(Bolt):
    outputs = ["word", "id", "pos"]

    def initialize(self, config, context):
        self.delay_s = float(config.get("wc.split.delay.ms", 0)) / 1000.0

    def process(self, tup):
        if self.delay_s:
            time.sleep(self.delay_s)  # a slow stage (tests: lines queue up, so a kill catches some in flight)
        msg_id, line = tup.values
        for pos, word in enumerate(line.split()):
            self.emit([word, msg_id, pos], anchors=[tup])
        self.ack(tup)


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    ap.add_argument("--queue", default="lines")
    ap.add_argument("--out", default="words")
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--split-delay-ms", type=float, default=0.0)
    args = ap.parse_args(argv)
    b = TopologyBuilder("rabbitmq_word_count")
    spout = b.add_spout("spout", RabbitMQSpout, par=2, config={
        "rabbitmq.url": args.url, "rabbitmq.queue": args.queue, "rabbitmq.queue.declare": True,
        "rabbitmq.reconnect.max.ms": 1000, "rabbitmq.retry.max.delay.ms": 1000})
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE},
                       config={"wc.split.delay.ms": args.split_delay_ms})
    b.add_bolt("sink", RabbitMQBolt, par=2, inputs={split: Grouping.fields("word")}, config={
        "rabbitmq.url": args.url, "rabbitmq.routing.key": args.out, "rabbitmq.queue.declare": True,
        "rabbitmq.batch.size": 50, "rabbitmq.batch.delay.ms": 5, "rabbitmq.reconnect.max.ms": 1000})
    b.set_config({"topology.stmgrs": args.containers, "topology.reliability.mode": "ATLEAST_ONCE",
                  "topology.message.timeout.secs": 4, "topology.max.spout.pending": 500})
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
