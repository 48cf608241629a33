from bolts.stopwords import StopwordBolt, WordSink
from spouts.words import FileWordSpout
from streamparse import Grouping, Topology


class DataWords(Topology):
    word_spout = FileWordSpout.spec()
    filter_bolt = StopwordBolt.spec(inputs={word_spout: Grouping.fields("word")}, par=2)
    sink = WordSink.spec(inputs=[filter_bolt])
