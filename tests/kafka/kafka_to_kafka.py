"""Kafka → transform → Kafka, at least once, for the Kafka integration tests.

KafkaSpout (par 2) emits topic, partition, offset, key, value; ``upper`` emits the record's
"topic:partition:offset" as the key and its value upper-cased as the message; KafkaBolt (par 2)
produces them to the output topic and acks each input only once the broker confirmed it.
"""

import argparse
import sys

from heron_py.connectors.kafka import KafkaBolt, KafkaSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class UpperBolt(Bolt):
    outputs = ["key", "message"]

    def process(self, tup):
        topic, partition, offset, _key, value = tup.values
        self.emit([f"{topic}:{partition}:{offset}", value.upper()], anchors=[tup])
        self.ack(tup)


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", help="the input topic")
    ap.add_argument("--pattern", help="or a pattern of input topics (kafka.topic.pattern)")
    ap.add_argument("--output", required=True)
    ap.add_argument("--group", required=True)
    args = ap.parse_args(argv)
    b = TopologyBuilder("kafka_to_kafka")
    spout = KafkaSpout.spec(name="kafka", par=2, config={
        "kafka.bootstrap.servers": args.bootstrap, "kafka.group.id": args.group,
        **({"kafka.topic.pattern": args.pattern} if args.pattern else {"kafka.topics": [args.input]}),
        "kafka.offset.commit.period.ms": 300, "kafka.partition.refresh.period.ms": 1000,
    })
    b.add_spec(spout)
    upper = b.add_bolt("upper", UpperBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("sink", KafkaBolt, par=2, inputs={upper: Grouping.SHUFFLE},
               config={"kafka.bootstrap.servers": args.bootstrap, "kafka.topic": args.output})
    b.set_config({"topology.stmgrs": 2, "topology.reliability.mode": "ATLEAST_ONCE",
                  "topology.message.timeout.secs": 5, "topology.max.spout.pending": 500})
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
