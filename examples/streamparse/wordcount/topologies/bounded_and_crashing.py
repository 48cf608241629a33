"""heron-py test addition: wordcount_bounded.py's pipeline and crashing.py's bolt side by side in
one topology, so the tests launch it once for both (issue 40). The two share no component: the
bounded spout feeds the counts, the template's endless WordSpout (named word_spout, as in
crashing.py) feeds the bolt that raises on "zebra"; its task dying and restarting touches no
count."""

from bolts.wordcount import WordCountBolt
from crashing import CrashingBolt
from spouts.bounded_words import BoundedWordSpout
from spouts.words import WordSpout
from streamparse import Grouping, Topology
from wordcount_bounded import CountSink


class BoundedAndCrashing(Topology):
    config = {"wordcount.words": 4000}
    bounded_spout = BoundedWordSpout.spec()
    count_bolt = WordCountBolt.spec(inputs={bounded_spout: Grouping.fields("word")}, par=2)
    sink = CountSink.spec(inputs=[count_bolt])
    word_spout = WordSpout.spec()
    crash_bolt = CrashingBolt.spec(inputs={word_spout: Grouping.fields("word")})
