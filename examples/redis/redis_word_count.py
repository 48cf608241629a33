"""Word count from a Redis stream, at least once, on 2 containers.

    redis-server --port 6379 --appendonly yes &
    for i in $(seq 1000); do redis-cli XADD lines '*' value "the quick brown fox $i"; done
    heron-py submit local examples/redis/redis_word_count.py -- --url redis://127.0.0.1:6379/0 \\
        --stream lines --sink stream --out words
    redis-cli XLEN words            # one entry per word: word, id (the line's entry id), pos

    heron-py submit local examples/redis/redis_word_count.py -- --url redis://127.0.0.1:6379/0 \\
        --stream lines --sink incrby --out counts
    redis-cli HGETALL counts        # word -> count (HINCRBY)

``RedisStreamSpout`` reads the stream through the consumer group ``--group`` (made at the start
if missing), ``split`` emits each word anchored to its line with (entry id, position), and the
sink writes it: ``--sink stream`` XADDs (word, id, pos) to the stream ``--out`` (a reader
de-duplicates replays by (id, pos): exact), ``--sink incrby`` HINCRBYs the hash ``--out`` (a
replay after a failure counts its words again: at least once). A line is XACKed only when all
its words were written.
"""

import argparse
import sys
import time

from heron_py.connectors.redis import RedisStoreBolt, RedisStreamBolt, RedisStreamSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class SplitBolt(Bolt):
    outputs = ["word", "id", "pos", "one"]

    def initialize(self, config, context):
        self.delay_s = float(config.get("wc.split.delay.ms", 0)) / 1000.0

    def process(self, tup):
        if self.delay_s:
            time.sleep(self.delay_s)  # a slow stage (tests: lines queue, so a kill loses some for sure)
        entry_id, line = tup.values
        for pos, word in enumerate(line.split()):
            self.emit([word, entry_id, pos, 1], anchors=[tup])
        self.ack(tup)


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--stream", default="lines")
    ap.add_argument("--group", default="word-count")
    ap.add_argument("--sink", choices=["stream", "incrby"], default="stream")
    ap.add_argument("--out", default="words")
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--claim-idle-ms", type=int, default=30_000)
    ap.add_argument("--split-delay-ms", type=float, default=0.0)
    args = ap.parse_args(argv)
    b = TopologyBuilder("redis_word_count")
    spout = RedisStreamSpout.spec(name="spout", par=2, config={
        "redis.url": args.url, "redis.stream": args.stream, "redis.group": args.group, "redis.create.group": True,
        "redis.claim.idle.ms": args.claim_idle_ms, "redis.reconnect.max.ms": 1000,
    })
    b.add_spec(spout)
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE},
                       config={"wc.split.delay.ms": args.split_delay_ms})
    server = {"redis.url": args.url, "redis.batch.size": 100, "redis.batch.delay.ms": 5,
              "redis.reconnect.max.ms": 1000}
    if args.sink == "stream":
        sink = RedisStreamBolt.spec(name="sink", par=2, inputs={split: Grouping.fields("word")}, config={
            **server, "redis.stream": args.out, "redis.fields": ["word", "id", "pos"]})
    else:
        sink = RedisStoreBolt.spec(name="sink", par=2, inputs={split: Grouping.fields("word")}, config={
            **server, "redis.data.type": "HINCRBY", "redis.additional.key": args.out,
            "redis.key.field": "word", "redis.value.field": "one"})
    b.add_spec(sink)
    b.set_config({"topology.stmgrs": args.containers, "topology.reliability.mode": "ATLEAST_ONCE",
                  "topology.message.timeout.secs": 4, "topology.max.spout.pending": 500})
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
