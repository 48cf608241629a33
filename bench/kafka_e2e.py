"""Kafka → word count → Kafka end to end, on a Tansu broker it starts (issue 35, acceptance 7):
throughput (input records/s) and the latency of each count update (produce → read back). The
lead runs it:

    .venv/bin/python bench/kafka_e2e.py [--records 100000] [--rate 0] [--par 2]

The input records are sentences of 4 words, each prefixed with its send time; the topology is
KafkaSpout (par P, at least once) → split → count (fields grouping) → KafkaBolt, the count
emitting (word, "count send-time") for each word. A reader on the output topic takes each
record's latency as its arrival time minus the send time of the input record it came from.
``--rate 0`` produces everything first and measures throughput (first record in → last count
out); ``--rate R`` paces the input at R records/s, which is the fair way to read the latency.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.kafka_broker import TansuBroker  # noqa: E402

WORDS = 4  # per input record
TOPOLOGY = '''
import sys
from collections import Counter
from heron_py.connectors.kafka import KafkaBolt, KafkaSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

class Split(Bolt):
    outputs = ["word", "sent"]
    def process(self, tup):
        sent, _, text = tup.values[4].partition(" ")
        for w in text.split():
            self.emit([w, sent], anchors=[tup])
        self.ack(tup)

class Count(Bolt):
    outputs = ["key", "message"]
    def initialize(self, config, context):
        self.counts = Counter()
    def process(self, tup):
        word, sent = tup.values
        self.counts[word] += 1
        self.emit([word, f"{self.counts[word]} {sent}"], anchors=[tup])
        self.ack(tup)

bootstrap, par = sys.argv[1], int(sys.argv[2])
b = TopologyBuilder("kafka_e2e")
spout = KafkaSpout.spec(name="kafka", par=par, config={"kafka.bootstrap.servers": bootstrap,
    "kafka.topics": ["e2e-in"], "kafka.group.id": "e2e", "kafka.offset.commit.period.ms": 1000})
b.add_spec(spout)
split = b.add_bolt("split", Split, par=par, inputs={spout: Grouping.SHUFFLE})
count = b.add_bolt("count", Count, par=par, inputs={split: Grouping.fields("word")})
b.add_bolt("out", KafkaBolt, par=par, inputs={count: Grouping.SHUFFLE},
           config={"kafka.bootstrap.servers": bootstrap, "kafka.topic": "e2e-out"})
b.set_config({"topology.stmgrs": 1, "topology.reliability.mode": "ATLEAST_ONCE",
              "topology.max.spout.pending": 2000})
b.build_and_submit()
'''


def produce(bootstrap: str, n: int, rate: float) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    t0 = time.perf_counter()
    for i in range(n):
        if rate and i % 100 == 0:
            ahead = i / rate - (time.perf_counter() - t0)
            if ahead > 0:
                time.sleep(ahead)
        p.produce("e2e-in", value=f"{time.time():.6f} w{i % 101} x{i % 13} y{i % 7} z{i % 3}".encode())
        if i % 1000 == 0:
            p.poll(0)
    p.flush(120)


def read(bootstrap: str, expected: int, timeout_s: float) -> tuple[list[float], float]:
    """Latencies (s) of the output records and the arrival time of the last one."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-reader", "enable.auto.commit": False})
    parts = c.list_topics("e2e-out", timeout=10).topics["e2e-out"].partitions
    c.assign([TopicPartition("e2e-out", p, -2) for p in parts])
    lat: list[float] = []
    last = time.time()
    deadline = time.monotonic() + timeout_s
    while len(lat) < expected and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                last = time.time()
                lat.append(last - float((m.value() or b"0 0").split()[1]))
    c.close()
    return lat, last


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--rate", type=float, default=0, help="input records/s; 0: all produced first")
    ap.add_argument("--par", type=int, default=2)
    args = ap.parse_args()
    from heron_py.testing import run_local
    from heron_py.testing.local import kill_local

    home = Path(tempfile.mkdtemp(prefix="kafka_e2e"))
    broker = TansuBroker(home)
    try:
        broker.create_topic("e2e-in", args.par)
        broker.create_topic("e2e-out", args.par)
        f = home / "kafka_e2e_topology.py"
        f.write_text(TOPOLOGY)
        if not args.rate:
            produce(broker.bootstrap, args.records, 0)
        run = run_local(f, [broker.bootstrap, str(args.par)], home=home, name="kafka_e2e", keep_running=True)
        try:
            t0 = time.time()
            feeder = threading.Thread(target=produce, args=(broker.bootstrap, args.records, args.rate)) \
                if args.rate else None
            if feeder:
                feeder.start()
            lat, last = read(broker.bootstrap, args.records * WORDS, 600)
            if feeder:
                feeder.join()
        finally:
            kill_local(home, run.name)
        if len(lat) < args.records * WORDS:
            print(f"only {len(lat)} of {args.records * WORDS} count updates came out within 600 s")
        qs = statistics.quantiles(lat, n=100) if len(lat) >= 100 else [float("nan")] * 99
        print(f"| records | rate (records/s) | par | throughput (records/s) | p50 latency (ms) | p99 latency (ms) |\n"
              f"|---|---|---|---|---|---|\n"
              f"| {args.records} | {args.rate or 'unpaced'} | {args.par} | {args.records / (last - t0):,.0f} | "
              f"{qs[49] * 1000:.1f} | {qs[98] * 1000:.1f} |")
        if not args.rate:
            print("(unpaced: the latency includes the time the input waited in the topic; read it with --rate)")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
