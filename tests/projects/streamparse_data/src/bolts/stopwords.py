import os
import sys

from streamparse import Bolt

HERE = os.path.dirname(os.path.abspath(__file__))


def runs_as():
    """'subprocess' in streamparse's own runner (python -m streamparse.run), else 'in-process'."""
    spec = getattr(sys.modules["__main__"], "__spec__", None)
    return "subprocess" if getattr(spec, "name", "") == "streamparse.run" else "in-process"


class StopwordBolt(Bolt):
    """Drops the words listed in stopwords.txt beside this module."""

    outputs = ["word", "runs_as"]

    def initialize(self, conf, ctx):
        with open(os.path.join(HERE, "stopwords.txt"), encoding="utf-8") as f:
            self.stop = set(f.read().split())
        self.runs_as = runs_as()

    def process(self, tup):
        word = tup.values[0]
        if word not in self.stop:
            self.emit([word, self.runs_as])


class WordSink(Bolt):
    def process(self, tup):
        pass
