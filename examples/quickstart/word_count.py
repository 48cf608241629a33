"""The README's topology: count words, logged every second. Imports heronpy only.

    heron-py submit local examples/quickstart/word_count.py
    heron-py logs local quickstart count      # "count: 3000 words, 10 distinct; top: the=600, ..."
    heron-py kill local quickstart
    python -m pytest examples/quickstart                # its test, test_word_count.py (pip install pytest)
"""
import itertools
from collections import Counter

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

SENTENCES = ["the cow jumped over the moon", "an apple a day keeps the doctor away"]


class SentenceSpout(Spout):
    outputs = ["sentence"]

    def initialize(self, config, context):
        self.left = itertools.islice(itertools.cycle(SENTENCES), 1000)  # 1000 sentences, then idle

    def next_tuple(self):
        sentence = next(self.left, None)
        if sentence is not None:
            self.emit([sentence])


class SplitBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for word in tup.values[0].split():
            self.emit([word])


class CountBolt(Bolt):
    def initialize(self, config, context):
        self.counts = Counter()

    def process(self, tup):
        self.counts[tup.values[0]] += 1

    def process_tick(self, tup):  # every topology.tick.tuple.freq.secs
        top = ", ".join(f"{w}={c}" for w, c in self.counts.most_common(3))
        self.log(f"count: {self.counts.total()} words, {len(self.counts)} distinct; top: {top}")


def build():
    builder = TopologyBuilder("quickstart")
    sentences = builder.add_spout("sentence", SentenceSpout, par=1)
    words = builder.add_bolt("split", SplitBolt, par=2, inputs={sentences: Grouping.SHUFFLE})
    builder.add_bolt("count", CountBolt, par=2, inputs={words: Grouping.fields("word")},
                     config={"topology.tick.tuple.freq.secs": 1})
    return builder


if __name__ == "__main__":
    build().build_and_submit()
