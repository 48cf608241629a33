"""Test topology for batch runs of a sink: numbers from a bounded input, a pass-through bolt, and
a sink bolt (par 2) that emits nothing and writes every value it gets to a file of its own task,
closed in cleanup(), as a Storm bolt writing to a store would. Its folder is the topology's
first argument."""

import os
import sys

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class Numbers(Spout):
    outputs = ["n"]


class PassOn(Bolt):
    outputs = ["n"]

    def process(self, tup):
        self.emit([tup.values[0]])


class FileSink(Bolt):
    outputs = []

    def initialize(self, config, context):
        folder = config["sink.folder"]
        # open until cleanup(), as a store connection would be
        self.out = open(os.path.join(folder, f"task-{context.get_task_id()}.txt"), "w")  # noqa: SIM115

    def process(self, tup):
        self.out.write(f"{tup.values[0]}\n")

    def cleanup(self):
        self.out.close()


if __name__ == "__main__":
    b = TopologyBuilder("sink_batch")
    numbers = b.add_spout("numbers", Numbers, par=1)
    passed = b.add_bolt("pass", PassOn, par=2, inputs={numbers: Grouping.SHUFFLE})
    b.add_bolt("sink", FileSink, par=2, inputs={passed: Grouping.fields("n")})
    b.set_config({"sink.folder": sys.argv[1]})
    b.build_and_submit()
