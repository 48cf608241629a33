"""Test topology for writing batch outputs: a bounded spout of numbers and bolts that emit rows
of every type Spark infers from Python values, rows whose type changes after the first 100
(a row Spark's verifier refuses), types that differ within the first rows, a field that is None
in every row, and no rows at all."""

import datetime
import decimal

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

COUNT = 300
TYPED = ["i", "f", "s", "b", "raw", "ints", "m", "d", "ts", "dec", "opt", "pair"]


class Numbers(Spout):
    outputs = ["n"]
    bounded = True

    def initialize(self, config, context):
        self.n = 0

    def next_tuple(self):
        if self.n < COUNT:
            self.emit([self.n])
            self.n += 1


def typed_row(n):
    day = datetime.date(2026, 1, 1) + datetime.timedelta(days=n)
    return [n, n / 7, f"w{n}", n % 2 == 0, bytes([n % 256, 7]), list(range(n % 4)), {f"k{n % 3}": n},
            day, datetime.datetime(2026, 1, 1, 12, 30) + datetime.timedelta(minutes=n),
            decimal.Decimal(n) / 4, None if n % 3 == 0 else f"o{n}", (n, f"p{n}")]


class Typed(Bolt):
    outputs = TYPED

    def process(self, tup):
        self.emit(typed_row(tup.values[0]))


class Mixed(Bolt):
    """An int in the first rows, a string from the 200th: the head says long, a later row is not."""
    outputs = ["v"]

    def process(self, tup):
        n = tup.values[0]
        self.emit([n if n < 200 else f"s{n}"])


class Clash(Bolt):
    """A long in some of the first rows and a double in others: Spark's inference does not merge
    the two (it would merge a long and a string, into a string)."""
    outputs = ["v"]

    def process(self, tup):
        n = tup.values[0]
        self.emit([n if n % 3 else n / 2])


class Nulls(Bolt):
    outputs = ["n", "nothing"]

    def process(self, tup):
        self.emit([tup.values[0], None])


class Quiet(Bolt):
    outputs = ["x"]

    def process(self, tup):
        pass


def build():
    b = TopologyBuilder("typed_batch")
    numbers = b.add_spout("numbers", Numbers, par=1)
    for name, cls in (("typed", Typed), ("mixed", Mixed), ("nulls", Nulls), ("quiet", Quiet), ("clash", Clash)):
        b.add_bolt(name, cls, par=2, inputs={numbers: Grouping.SHUFFLE})
    return b


if __name__ == "__main__":
    build().build_and_submit()
