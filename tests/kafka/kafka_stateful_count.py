"""Kafka → split → stateful count, effectively once, for the Kafka integration tests.

The KafkaSpout (par 2) checkpoints its partitions' positions; the count keeps its counts in
its state. No acking and no de-duplication: after any failure every task rolls back to the
last completed checkpoint and the spout seeks to that checkpoint's positions.
"""

import argparse
import sys
from collections import Counter

from heron_py.connectors.kafka import KafkaSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.state.stateful_component import StatefulComponent
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class SplitBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for w in tup.values[4].split():
            self.emit([w])


class StatefulCountBolt(Bolt, StatefulComponent):
    outputs = ["word", "count"]

    def init_state(self, stateful_state):
        self.state = stateful_state
        self.counts = Counter(dict(stateful_state.enumerate()))
        self.logger.info(f"count restored with {sum(self.counts.values())} words")

    def pre_save(self, checkpoint_id):
        for word, n in self.counts.items():
            self.state.put(word, n)

    def initialize(self, config, context):
        pass

    def process(self, tup):
        self.counts[tup.values[0]] += 1


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    args = ap.parse_args(argv)
    b = TopologyBuilder("kafka_stateful_count")
    spout = KafkaSpout.spec(name="kafka", par=2, config={
        "kafka.bootstrap.servers": args.bootstrap, "kafka.topics": [args.topic], "kafka.group.id": args.group,
        "kafka.offset.commit.period.ms": 300, "kafka.partition.refresh.period.ms": 1000,
    })
    b.add_spec(spout)
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("count", StatefulCountBolt, par=2, inputs={split: Grouping.fields("word")})
    b.set_config({"topology.stmgrs": 2, "topology.reliability.mode": "EFFECTIVELY_ONCE",
                  "topology.stateful.checkpoint.interval.seconds": 1})
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
