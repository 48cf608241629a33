import sys

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

from .bolts import Shout
from .spouts import Letters


class Sink(Bolt):
    """Defined in __main__.py itself: containers load it as the topology's own module."""

    outputs = []

    def process(self, tup):
        pass


def main(name):
    builder = TopologyBuilder(name)
    letters = builder.add_spout("letters", Letters, par=1)
    shout = builder.add_bolt("shout", Shout, par=2, inputs={letters: Grouping.SHUFFLE})
    builder.add_bolt("sink", Sink, par=1, inputs={shout: Grouping.SHUFFLE})
    builder.build_and_submit()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "mytopo")
