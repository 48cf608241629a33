"""Every grouping kind of the examples beside it in one topology: one NumberSpout feeds a
RecordBolt (3 tasks) per grouping, named ``record_<grouping>``, and the direct-grouping
example's two-stream spout feeds its two bolts; 2 containers. The test suite runs this once
where it would launch each example apart (tests/integration/test_groupings.py).

    heron-py submit local examples/groupings/all_groupings.py
"""

from custom_grouping import EvenOddGrouping
from direct_grouping import TwoStreamSpout
from grouping_common import NumberSpout, RecordBolt

from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

GROUPINGS = {
    "shuffle": Grouping.SHUFFLE,
    "none": Grouping.NONE,
    "fields": Grouping.fields("key"),
    "all": Grouping.ALL,
    "lowest": Grouping.LOWEST,
    "local_or_shuffle": Grouping.LOCAL_OR_SHUFFLE,
    "partial_key": Grouping.partial_key("key"),
    "custom": Grouping.custom(EvenOddGrouping()),
}


def build(count=1000):
    b = TopologyBuilder("all_groupings")
    numbers = b.add_spout("numbers", NumberSpout, par=1, config={"numbers.count": count})
    for name, grouping in GROUPINGS.items():
        b.add_bolt(f"record_{name}", RecordBolt, par=3, inputs={numbers: grouping})
    two = b.add_spout("spout", TwoStreamSpout, par=1, config={"numbers.count": count})
    b.add_bolt("numbers_bolt", RecordBolt, par=2, inputs={two["numbers"]: Grouping.SHUFFLE})
    b.add_bolt("tens_bolt", RecordBolt, par=3, inputs={two["tens"]: Grouping.DIRECT})
    b.set_config({"topology.stmgrs": 2, "topology.tick.tuple.freq.secs": 2})
    return b


if __name__ == "__main__":
    build().build_and_submit()
