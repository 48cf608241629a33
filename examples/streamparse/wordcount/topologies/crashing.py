"""heron-py test addition: a pystorm bolt that raises on "zebra" (its task dies, is restarted)."""

from streamparse import Bolt, Grouping, Topology

from spouts.words import WordSpout


class CrashingBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        word = tup.values.word
        if word == "zebra":
            raise ValueError(f"no zebras here (task {self.task_id})")
        self.emit([word])


class Crashing(Topology):
    word_spout = WordSpout.spec()
    crash_bolt = CrashingBolt.spec(inputs={word_spout: Grouping.fields("word")})
