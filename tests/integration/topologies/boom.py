"""A small topology for the metrics tests: numbers go through a bolt that raises once, on
number 13, so the tracker's exceptions endpoint has a traceback to show; a user metric
counts what the sink saw."""

import sys
import time

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.metrics import CountMetric, MeanReducedMetric, MultiCountMetric
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.n = 0
        self.limit = int(config.get("boom.count", 2000))

    def next_tuple(self):
        # paced (about 1000 a second), so numbers keep coming after the bolt's restart
        if self.n < self.limit:
            self.emit([self.n])
            self.n += 1
            time.sleep(0.001)


class Boom(Bolt):
    outputs = ["n"]

    def process(self, tup):
        if tup.values[0] == 13:
            raise ValueError("boom: thirteen is unlucky")
        self.emit(tup.values)


class Sink(Bolt):
    outputs = []

    def initialize(self, config, context):
        self.seen = CountMetric()
        self.parity = MultiCountMetric()
        self.mean = MeanReducedMetric()
        context.register_metric("seen", self.seen, 1)
        context.register_metric("parity", self.parity, 1)
        context.register_metric("mean_n", self.mean, 1)

    def process(self, tup):
        self.seen.incr()
        self.parity.incr("even" if tup.values[0] % 2 == 0 else "odd")
        self.mean.update(tup.values[0])


if __name__ == "__main__":
    b = TopologyBuilder("boom")
    s = b.add_spout("numbers", Numbers, par=1, config={"boom.count": int(sys.argv[1]) if len(sys.argv) > 1 else 2000})
    boom = b.add_bolt("boom", Boom, par=1, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("sink", Sink, par=2, inputs={boom: Grouping.SHUFFLE})
    b.set_config({"topology.stmgrs": 2, "topology.metrics.export.interval.secs": 1})
    b.build_and_submit()
