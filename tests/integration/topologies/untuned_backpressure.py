"""A spout as fast as it can go into a bolt that takes 5 ms per 1-KB tuple, 2 containers, and no
watermark, queue or batch setting: what backpressure holds with the engine's defaults
(tests/integration/test_backpressure_bound.py)."""

import sys
import time

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

PAYLOAD = 1000


class FastSpout(Spout):
    outputs = ["n", "payload"]

    def initialize(self, config, context):
        self.n = 0

    def next_tuple(self):
        # a new string per tuple: pickle would share one object within a batch otherwise
        self.emit([self.n, f"{self.n:012d}" + "x" * PAYLOAD])
        self.n += 1


class SlowBolt(Bolt):
    outputs = []

    def process(self, tup):
        time.sleep(0.005)


if __name__ == "__main__":
    b = TopologyBuilder(sys.argv[1] if len(sys.argv) > 1 else "untuned_backpressure")
    spout = b.add_spout("fast", FastSpout, par=2)
    b.add_bolt("slow", SlowBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    b.set_config({"topology.stmgrs": 2})
    b.build_and_submit()
