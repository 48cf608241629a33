from pathlib import Path

from heronpy.api.spout.spout import Spout

from .words import clean

DATA = Path(__file__).resolve().parent / "data" / "letters.txt"


class Letters(Spout):
    """Emits each line of data/letters.txt (a data file of the package, never imported) once."""

    outputs = ["letter"]

    def initialize(self, config, context):
        self.left = [clean(line) for line in DATA.read_text(encoding="utf-8").splitlines() if line.strip()]

    def next_tuple(self):
        if self.left:
            self.emit([self.left.pop(0)])
