"""A spout reached only through heron's extended __path__ (the second PYTHONPATH folder); its
words come from a module it imports by a computed name and from a data file beside it."""
import importlib
from pathlib import Path

from heronpy.api.spout.spout import Spout


class WordSpout(Spout):
    outputs = ["word"]

    def initialize(self, config, context):
        suffix = importlib.import_module(__package__ + "." + "suffix").SUFFIX  # a name no import line holds
        words = (Path(__file__).parent / "words.txt").read_text().split()
        self.todo = [w + suffix for w in words]

    def next_tuple(self):
        if self.todo:
            self.emit([self.todo.pop(0)])
