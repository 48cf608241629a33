"""Kafka → map → Kafka with the Streamlet API (KafkaSource, KafkaSink), for the Kafka
integration tests: each record's value upper-cased, keyed by its value."""

import argparse
import sys

from heron_py.connectors.kafka import KafkaSink, KafkaSource
from heronpy.streamlet.builder import Builder
from heronpy.streamlet.config import Config
from heronpy.streamlet.runner import Runner


def main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    args = ap.parse_args(argv)
    builder = Builder()
    source = KafkaSource({"kafka.bootstrap.servers": args.bootstrap, "kafka.topics": [args.input],
                          "kafka.group.id": "streamlet", "kafka.offset.commit.period.ms": 300})
    sink = KafkaSink({"kafka.bootstrap.servers": args.bootstrap, "kafka.topic": args.output}, key=lambda v: v.lower())
    builder.new_source(source).set_num_partitions(2).map(str.upper).to_sink(sink)
    Runner().run("kafka_streamlet", Config(), builder)


if __name__ == "__main__":
    main(sys.argv[1:])
