"""A topology whose every task carries a counting task hook (topology.auto.task.hooks): a
bounded tracked spout, a bolt that fails every 5th number and halves the others, a sink.
Each hook writes its counts to "{test.hook.dir}/hook-{task}.json" after every event, so the
test can compare them with the metrics the same tasks export."""

import json
import os
from collections import Counter

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.task_hook import ITaskHook
from heronpy.api.topology import TopologyBuilder

N = 400


class CountingHook(ITaskHook):
    def prepare(self, conf, context):
        self.counts = Counter()
        self.path = os.path.join(conf["test.hook.dir"], f"hook-{context.get_task_id()}.json")

    def _count(self, event):
        self.counts[event] += 1
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.counts, f)
        os.replace(tmp, self.path)

    def emit(self, info):
        self._count("emit")

    def spout_ack(self, info):
        self._count("spout_ack")

    def spout_fail(self, info):
        self._count("spout_fail")

    def bolt_execute(self, info):
        self._count("bolt_execute")

    def bolt_ack(self, info):
        self._count("bolt_ack")

    def bolt_fail(self, info):
        self._count("bolt_fail")

    def clean_up(self):
        pass


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.n = 0

    def next_tuple(self):
        if self.n < N:
            self.n += 1
            self.emit([self.n], tup_id=self.n)


class Halver(Bolt):
    outputs = ["n"]

    def process(self, tup):
        if tup.values[0] % 5 == 0:
            self.fail(tup)
            return
        self.emit([tup.values[0] // 2], anchors=[tup])
        self.ack(tup)


class Sink(Bolt):
    outputs = []

    def process(self, tup):
        self.ack(tup)


b = TopologyBuilder("hooked")
s = b.add_spout("numbers", Numbers, par=1)
h = b.add_bolt("halver", Halver, par=2, inputs={s: Grouping.SHUFFLE})
b.add_bolt("sink", Sink, par=2, inputs={h: Grouping.SHUFFLE})
b.set_config({"topology.reliability.mode": "ATLEAST_ONCE", "topology.metrics.export.interval.secs": 1,
              "topology.auto.task.hooks": [f"{__name__}.CountingHook"]})
b.build_and_submit()
