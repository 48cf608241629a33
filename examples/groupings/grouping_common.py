"""Shared parts of the grouping examples: a bounded spout of numbered keys and a bolt that
logs what it receives. Imported by each example, so it also travels in the topology package."""

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout


class NumberSpout(Spout):
    """Emits (n, key) for n in 0..count-1, key = "k<n % keys>"; config: numbers.count, numbers.keys."""

    outputs = ["n", "key"]

    def initialize(self, config, context):
        self.count = int(config.get("numbers.count", 1000))
        self.keys = int(config.get("numbers.keys", 50))
        self.n = 0

    def next_tuple(self):
        if self.n < self.count:
            self.emit([self.n, f"k{self.n % self.keys}"])
            self.n += 1


class RecordBolt(Bolt):
    """Counts what it receives and logs the count on every tick."""

    outputs = []

    def initialize(self, config, context):
        self.seen = 0
        self.task = context.get_task_id()

    def process(self, tup):
        self.seen += 1

    def process_tick(self, tup):
        self.log(f"task {self.task} received {self.seen} tuples")


def build(name, grouping, par=3, count=1000, spout_par=1, containers=2):
    from heronpy.api.topology import TopologyBuilder

    b = TopologyBuilder(name)
    spout = b.add_spout("numbers", NumberSpout, par=spout_par, config={"numbers.count": count})
    b.add_bolt("record", RecordBolt, par=par, inputs={spout: grouping})
    b.set_config({"topology.stmgrs": containers, "topology.tick.tuple.freq.secs": 2})
    return b
