"""Word count from a RabbitMQ queue into a PostgreSQL table, at least once, on 2 containers.

    psql -c "CREATE TABLE words (id text, pos int, word text NOT NULL CHECK (length(word) <= 20),
             writes int NOT NULL DEFAULT 1, PRIMARY KEY (id, pos))"
    heron-py submit local examples/postgres/postgres_word_count.py -- \\
        --amqp amqp://guest:guest@127.0.0.1:5672/%2F --queue lines \\
        --postgres postgresql://postgres:secret@127.0.0.1:5432/postgres --table words
    # publish lines to the queue 'lines' (message_id = the line's id), then:
    psql -c "SELECT word, count(*) FROM words GROUP BY word ORDER BY 2 DESC LIMIT 10"

``RabbitMQSpout`` consumes the lines, ``split`` emits each word anchored to its line with
(message id, position), and ``PostgresInsertBolt`` upserts it in batches: ``(id, pos)`` is the
primary key, so a word replayed after a failure updates its row (``writes`` counts the writes)
instead of adding one: the table is exact. A line is acked to the broker only when the batches
holding all its words were committed. A word the table refuses (longer than 20 characters) is
failed and logged once with its (id, pos); the rest of its batch is written.
"""

import argparse
import sys
import time

from heron_py.connectors.postgres import PostgresInsertBolt
from heron_py.connectors.rabbitmq import RabbitMQSpout
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
    ap.add_argument("--amqp", default="amqp://guest:guest@127.0.0.1:5672/%2F")
    ap.add_argument("--queue", default="lines")
    ap.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    ap.add_argument("--table", default="words")
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--split-delay-ms", type=float, default=0.0)
    args = ap.parse_args(argv)
    b = TopologyBuilder("postgres_word_count")
    spout = b.add_spout("spout", RabbitMQSpout, par=2, config={
        "rabbitmq.url": args.amqp, "rabbitmq.queue": args.queue, "rabbitmq.queue.declare": True,
        "rabbitmq.reconnect.max.ms": 1000, "rabbitmq.retry.max.delay.ms": 1000})
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE},
                       config={"wc.split.delay.ms": args.split_delay_ms})
    b.add_bolt("sink", PostgresInsertBolt, par=2, inputs={split: Grouping.fields("word")}, config={
        "postgres.url": args.postgres, "postgres.columns": ["word", "id", "pos"],
        "postgres.insert.query": f"INSERT INTO {args.table} (word, id, pos) VALUES (%s, %s, %s) "
                                 f"ON CONFLICT (id, pos) DO UPDATE SET writes = {args.table}.writes + 1",
        "postgres.input.id.fields": ["id", "pos"],
        "postgres.batch.size": 100, "postgres.batch.delay.ms": 10, "postgres.reconnect.max.ms": 1000})
    b.set_config({"topology.stmgrs": args.containers, "topology.reliability.mode": "ATLEAST_ONCE",
                  "topology.message.timeout.secs": 4, "topology.max.spout.pending": 500})
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
