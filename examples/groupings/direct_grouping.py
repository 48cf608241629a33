"""Named streams and direct emit: the spout emits every number on the "numbers" stream, and
multiples of 10 also on a direct stream "tens", choosing the consumer task itself
(n // 10 modulo the number of tasks). Class-style topology definition.

    heron-py submit local examples/groupings/direct_grouping.py
"""

from grouping_common import RecordBolt

from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping, Stream
from heronpy.api.topology import Topology


class TwoStreamSpout(Spout):
    outputs = [Stream(fields=["n"], name="numbers"), Stream(fields=["n"], name="tens", direct=True)]

    def initialize(self, config, context):
        self.count = int(config.get("numbers.count", 1000))
        self.targets = context.get_component_tasks("tens_bolt")
        self.n = 0

    def next_tuple(self):
        n = self.n
        if n >= self.count:
            return
        self.emit([n], stream="numbers")
        if n % 10 == 0:
            self.emit([n], stream="tens", direct_task=self.targets[(n // 10) % len(self.targets)])
        self.n = n + 1


class DirectGrouping(Topology):
    config = {"topology.stmgrs": 2, "topology.tick.tuple.freq.secs": 2}
    spout = TwoStreamSpout.spec(par=1)
    numbers_bolt = RecordBolt.spec(par=2, inputs={spout["numbers"]: Grouping.SHUFFLE})
    tens_bolt = RecordBolt.spec(par=3, inputs={spout["tens"]: Grouping.DIRECT})
