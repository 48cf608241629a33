"""The KafkaSpout's records/s against a bare confluent-kafka consumer loop, on the same Tansu
broker and topic (issue 35's goal: >= 0.8x). The lead runs it:

    .venv/bin/python bench/kafka_bench.py [--records 200000]

It produces the records once, times a bare loop (assign, consume until all are read), then runs
a topology KafkaSpout (par 1, acking off) -> a counting bolt on the local scheduler and times
until the group's committed offsets reach the log end."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.kafka_broker import TansuBroker  # noqa: E402

TOPOLOGY = '''
import sys
from heron_py.connectors.kafka import KafkaSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

class Count(Bolt):
    def initialize(self, config, context):
        self.n = 0
    def process(self, tup):
        self.n += 1

b = TopologyBuilder("kafka_bench")
spout = KafkaSpout.spec(name="kafka", par=1, config={"kafka.bootstrap.servers": sys.argv[1],
    "kafka.topics": ["bench"], "kafka.group.id": "bench", "kafka.processing.guarantee": "NO_GUARANTEE",
    "kafka.offset.commit.period.ms": 200})
b.add_spec(spout)
b.add_bolt("count", Count, par=1, inputs={spout: Grouping.SHUFFLE})
b.set_config({"topology.stmgrs": 1})
b.build_and_submit()
'''


def bare(bootstrap: str, n: int) -> float:
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bare", "enable.auto.commit": False})
    c.assign([TopicPartition("bench", 0, -2)])
    got, t0 = 0, time.perf_counter()
    while got < n:
        got += sum(1 for m in c.consume(500, 1.0) if m.error() is None)
    dt = time.perf_counter() - t0
    c.close()
    return n / dt


def spout(broker: TansuBroker, home: Path, n: int) -> float:
    from heron_py.testing import run_local
    from heron_py.testing.local import kill_local
    f = home / "kafka_bench_topology.py"
    f.write_text(TOPOLOGY)
    t0 = time.perf_counter()
    run = run_local(f, [broker.bootstrap], home=home, name="kafka_bench", keep_running=True)
    t_sub = time.perf_counter()
    try:
        while broker.committed("bench", "bench").get(0, -1) < n:
            time.sleep(0.05)
        return n / (time.perf_counter() - t_sub)
    finally:
        kill_local(home, run.name)
        print(f"(submit took {t_sub - t0:.1f} s, not counted)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="kafka_bench"))
    broker = TansuBroker(home)
    try:
        broker.create_topic("bench", 1)
        broker.produce("bench", [(None, f"record {i} " .encode() + b"x" * 80) for i in range(args.records)],
                       partition=0)
        b = bare(broker.bootstrap, args.records)
        s = spout(broker, home, args.records)
        print(f"| records | bare confluent-kafka loop (records/s) | KafkaSpout (records/s) | ratio |\n"
              f"|---|---|---|---|\n| {args.records} | {b:,.0f} | {s:,.0f} | {s / b:.2f}x |")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
