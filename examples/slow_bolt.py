"""Backpressure, made visible: a spout as fast as it can go into a bolt that sleeps per tuple.

    heron-py submit local examples/slow_bolt.py -- --sleep-ms 2
    heron-py status local slow_bolt          # shows "IN BACKPRESSURE" and the time spent in it
    heron-py logs local slow_bolt stmgr      # "above the high watermark", "paused local spouts"

Without backpressure the stream managers' buffers would grow until a process is killed for
memory; with it, the spouts stop being read while the slow bolt's connection is above the
high watermark (topology config heron.streammgr.network.backpressure.highwatermark.mb,
default 16; this example sets 4/2 MB so it shows quickly). Each tuple carries a payload of
--payload bytes. The spout logs how many tuples it emitted when deactivated; the bolt logs
how many it received every second, so emitted == received can be checked after a drain.
"""

import argparse
import sys
import time

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class FastSpout(Spout):
    outputs = ["n", "payload"]

    def initialize(self, config, context):
        self.n = 0
        self.payload = "x" * int(config.get("slow.payload", 100))

    def next_tuple(self):
        # a new string per tuple: pickle would share one object within a batch otherwise
        self.emit([self.n, f"{self.n:012d}" + self.payload])
        self.n += 1

    def deactivate(self):
        self.log(f"emitted {self.n} tuples")


class SlowBolt(Bolt):
    outputs = []

    def initialize(self, config, context):
        self.sleep_s = float(config.get("slow.sleep.ms", 2)) / 1000.0
        self.received = 0

    def process(self, tup):
        self.received += 1
        time.sleep(self.sleep_s)

    def process_tick(self, tup):
        self.log(f"received {self.received} tuples")


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sleep-ms", type=float, default=2.0)
    ap.add_argument("--payload", type=int, default=100)
    ap.add_argument("--spouts", type=int, default=2)
    ap.add_argument("--bolts", type=int, default=2)
    args = ap.parse_args(argv)
    b = TopologyBuilder("slow_bolt")
    spout = b.add_spout("fast", FastSpout, par=args.spouts, config={"slow.payload": args.payload})
    b.add_bolt("slow", SlowBolt, par=args.bolts, inputs={spout: Grouping.SHUFFLE},
               config={"slow.sleep.ms": args.sleep_ms, "topology.tick.tuple.freq.secs": 1})
    b.set_config({
        "topology.stmgrs": 2,
        "heron.streammgr.network.backpressure.highwatermark.mb": 4,
        "heron.streammgr.network.backpressure.lowwatermark.mb": 2,
        # small instance queues: the backlog waits in bounded stream manager buffers
        "heron_py.instance.inbound.queue.batches": 8,
        "heron_py.instance.inbound.queue.bytes": 1 << 20,
        "heron_py.instance.outbound.queue.bytes": 1 << 20,
        "heron_py.instance.batch.size": 256,
    })
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
