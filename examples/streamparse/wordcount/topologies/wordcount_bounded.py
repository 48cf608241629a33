"""heron-py test addition: the template's word count on a bounded input, with a sink."""

from streamparse import Bolt, Grouping, Topology

from bolts.wordcount import WordCountBolt
from spouts.bounded_words import BoundedWordSpout


class CountSink(Bolt):
    """Receives count_bolt's (word, running count) tuples; the test captures them."""

    def process(self, tup):
        pass


class WordCountBounded(Topology):
    config = {"wordcount.words": 4000}
    word_spout = BoundedWordSpout.spec()
    count_bolt = WordCountBolt.spec(inputs={word_spout: Grouping.fields("word")}, par=2)
    sink = CountSink.spec(inputs=[count_bolt])
