"""Heron's window_size_topology.py habit: the spout comes from heron.examples.src.python, a
package that exists only through an extended __path__ over two PYTHONPATH folders."""
import sys

from heron.examples.src.python.spout import WordSpout

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.topology import TopologyBuilder


class Sink(Bolt):
    outputs = []

    def process(self, tup):
        pass


if __name__ == "__main__":
    b = TopologyBuilder(sys.argv[1] if len(sys.argv) > 1 else "dynamic_path")
    s = b.add_spout("words", WordSpout, par=1)
    b.add_bolt("sink", Sink, par=1, inputs=[s])
    b.build_and_submit()
