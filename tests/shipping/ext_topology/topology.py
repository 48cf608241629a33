"""A bolt that calls a compiled extension module of a library installed on PYTHONPATH."""
import sys

import fastcount

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.topology import TopologyBuilder


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.todo = [1, 2, 3]

    def next_tuple(self):
        if self.todo:
            self.emit([self.todo.pop(0)])


class Triple(Bolt):
    outputs = ["n", "where"]

    def process(self, tup):
        ext = fastcount.speedup()
        self.emit([ext.triple(tup.values[0]), ext.__file__])


class Sink(Bolt):
    outputs = []

    def process(self, tup):
        pass


if __name__ == "__main__":
    b = TopologyBuilder(sys.argv[1] if len(sys.argv) > 1 else "ext_topology")
    s = b.add_spout("numbers", Numbers, par=1)
    t = b.add_bolt("triple", Triple, par=1, inputs=[s])
    b.add_bolt("sink", Sink, par=1, inputs=[t])
    b.build_and_submit()
