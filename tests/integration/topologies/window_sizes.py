"""Heron's window example, written the heronpy way: a sliding window bolt (10 s, sliding every
2 s) logs the average number of tuples per window, at least once. The tick rate comes from the
window bolt's initialize(), as in heronpy."""

import itertools
import time

from heronpy.api import api_constants as constants
from heronpy.api.bolt.window_bolt import SlidingWindowBolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class WordSpout(Spout):
    outputs = ["word"]

    def initialize(self, config, context):
        self.words = itertools.cycle(["nathan", "mike", "jackson", "golda", "bertels"])
        self.n = 0
        self.acked = 0

    def next_tuple(self):
        time.sleep(0.01)  # about 100 words a second per task
        self.n += 1
        self.emit([next(self.words)], tup_id=self.n)

    def ack(self, tup_id):
        self.acked += 1
        if self.acked % 100 == 0:
            self.log(f"acked {self.acked}")


class WindowSizeBolt(SlidingWindowBolt):
    def initialize(self, config, context):
        super().initialize(config, context)
        self.numerator = 0.0
        self.denominator = 0.0

    def processWindow(self, window_info, tuples):
        self.numerator += len(tuples)
        self.denominator += 1
        self.logger.info("The current average is %f" % (self.numerator / self.denominator))


if __name__ == "__main__":
    builder = TopologyBuilder(name="window_sizes")
    word_spout = builder.add_spout("word_spout", WordSpout, par=2)
    builder.add_bolt("count_bolt", WindowSizeBolt, par=2, inputs={word_spout: Grouping.fields("word")},
                     config={SlidingWindowBolt.WINDOW_DURATION_SECS: 10,
                             SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS: 2})
    builder.set_config({constants.TOPOLOGY_RELIABILITY_MODE: constants.TopologyReliabilityMode.ATLEAST_ONCE})
    builder.build_and_submit()
