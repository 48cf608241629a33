"""Test topology for batch partitioning: one bounded spout, one recording bolt per grouping
kind. Each bolt emits (task, n, key) for every tuple it receives, so a batch run's output
says which task got which tuple. Runs unchanged on the streaming engine too."""

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.custom_grouping import ICustomGrouping
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping, Stream
from heronpy.api.topology import TopologyBuilder

COUNT = 600
KINDS = ["shuffle", "fields", "all", "lowest", "none", "local", "partial", "custom", "direct"]


class NumberSpout(Spout):
    outputs = [Stream(fields=["n", "key"], name="default"), Stream(fields=["n", "key"], name="direct", direct=True)]
    bounded = True  # stops after COUNT numbers: batch mode may run it to exhaustion

    def initialize(self, config, context):
        self.n = 0
        self.direct_targets = context.get_component_tasks("direct")

    def next_tuple(self):
        n = self.n
        if n >= COUNT:
            return
        key = f"k{n % 37}"
        self.emit([n, key])
        self.emit([n, key], stream="direct", direct_task=self.direct_targets[(n * 7) % len(self.direct_targets)])
        self.n = n + 1


class ModGrouping(ICustomGrouping):
    def prepare(self, context, component, stream, target_tasks):
        self.targets = sorted(target_tasks)

    def choose_tasks(self, values):
        return [self.targets[(values[0] * 3) % len(self.targets)]]


class Route(Bolt):
    outputs = ["task", "n", "key"]

    def initialize(self, config, context):
        self.task = context.get_task_id()

    def process(self, tup):
        self.emit([self.task, tup.values[0], tup.values[1]])


def build():
    b = TopologyBuilder("groupings_batch")
    spout = b.add_spout("numbers", NumberSpout, par=1)
    groupings = {
        "shuffle": Grouping.SHUFFLE, "fields": Grouping.fields("key"), "all": Grouping.ALL,
        "lowest": Grouping.LOWEST, "none": Grouping.NONE, "local": Grouping.LOCAL_OR_SHUFFLE,
        "partial": Grouping.partial_key("key"), "custom": Grouping.custom(ModGrouping()),
    }
    for name, g in groupings.items():
        b.add_bolt(name, Route, par=3, inputs={spout: g})
    b.add_bolt("direct", Route, par=3, inputs={spout["direct"]: Grouping.DIRECT})
    return b


if __name__ == "__main__":
    build().build_and_submit()
