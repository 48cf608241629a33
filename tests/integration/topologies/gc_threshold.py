"""Each task writes the gc thresholds and the GIL switch interval its process runs with to
"{test.gc.dir}/gc-{component}-{task}.json": the spout takes the topology's settings, the bolt
has its own in its component config."""

import gc
import json
import os
import sys

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


def _write(config, context):
    path = os.path.join(config["test.gc.dir"], f"gc-{context.get_component_id()}-{context.get_task_id()}.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"gc": list(gc.get_threshold()), "switch": sys.getswitchinterval()}, f)
    os.replace(path + ".tmp", path)


class One(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.config, self.context, self.sent = config, context, False

    def next_tuple(self):
        if not self.sent:
            self.sent = True
            _write(self.config, self.context)
            self.emit([1])


class Report(Bolt):
    outputs = []

    def initialize(self, config, context):
        self.config, self.context = config, context

    def process(self, tup):
        _write(self.config, self.context)


b = TopologyBuilder("gc_threshold")
s = b.add_spout("one", One, par=1)
b.add_bolt("report", Report, par=1, inputs={s: Grouping.SHUFFLE}, config={"heron_py.instance.gc.threshold": 2500,
                                                                  "heron_py.instance.switch.interval.ms": 0.5})
b.build_and_submit()
