"""Kafka → split → count, at least once, for the Kafka integration tests.

The spout (heron_py.connectors.kafka.KafkaSpout) emits topic, partition, offset, key, value;
split emits each word anchored to its record with (partition, offset, position); count keeps
each (partition, offset, position) once and appends "partition offset position time" to a file
of its task (flushed before the ack), so a test can check that no commit ran ahead of an ack.
"""

import argparse
import os
import sys
import time
from collections import Counter

from heron_py.connectors.kafka import KafkaSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class SplitBolt(Bolt):
    outputs = ["word", "partition", "offset", "pos"]

    def process(self, tup):
        _topic, partition, offset, _key, value = tup.values
        for pos, w in enumerate(value.split()):
            self.emit([w, partition, offset, pos], anchors=[tup])
        self.ack(tup)


class DedupCountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.seen = set()
        self.counts = Counter()
        folder = config["test.out.dir"]
        os.makedirs(folder, exist_ok=True)
        self.out = open(os.path.join(folder, f"count-{context.get_task_id()}-{os.getpid()}.txt"), "a")  # noqa: SIM115 (open for the task's life)

    def process(self, tup):
        word, partition, offset, pos = tup.values
        if (partition, offset, pos) not in self.seen:
            self.seen.add((partition, offset, pos))
            self.counts[word] += 1
        self.out.write(f"{partition} {offset} {pos} {time.time():.6f}\n")
        self.out.flush()  # before the ack: the test compares these times with the commits'
        self.ack(tup)

    def process_tick(self, tup):
        self.log(f"counted {sum(self.counts.values())} words")


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    b = TopologyBuilder("kafka_word_count")
    spout = KafkaSpout.spec(name="kafka", par=2, config={
        "kafka.bootstrap.servers": args.bootstrap, "kafka.topics": [args.topic], "kafka.group.id": args.group,
        "kafka.offset.commit.period.ms": 300, "kafka.partition.refresh.period.ms": 1000,
    })
    b.add_spec(spout)
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("count", DedupCountBolt, par=2, inputs={split: Grouping.fields("word")},
               config={"test.out.dir": args.out, "topology.tick.tuple.freq.secs": 1})
    b.set_config({"topology.stmgrs": 2, "topology.reliability.mode": "ATLEAST_ONCE",
                  "topology.message.timeout.secs": 4, "topology.max.spout.pending": 500})
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
