"""Components for the unit tests of the API and planner (module level: picklable)."""

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.stream import Stream


class WordSpout(Spout):
    outputs = ["word"]

    def initialize(self, config, context):
        self.words = list(config.get("words", "a b c d e f g h").split())
        self.i = 0

    def next_tuple(self):
        if self.i < len(self.words):
            self.emit([self.words[self.i]])
            self.i += 1


class Splitter(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for w in tup.values[0].split():
            self.emit([w])


class Counter(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.counts = {}

    def process(self, tup):
        self.counts[tup.values[0]] = self.counts.get(tup.values[0], 0) + 1


class TwoStreams(Spout):
    outputs = [Stream(["n"], name="evens"), Stream(["n", "label"], name="odds")]
