"""Word count over a folder of growing files, effectively once: exact counts through kill -9.

    mkdir -p /tmp/wc-in && for i in $(seq 1000); do echo "the quick brown fox $i" >> /tmp/wc-in/a.txt; done
    heron-py submit local examples/files/file_word_count.py -- --dir /tmp/wc-in
    echo "more lines are picked up" >> /tmp/wc-in/b.txt     # new files too

``FileTailSpout`` reads the folder's files line by line (each task the files it owns) and keeps
each file's (line, byte) position in its checkpointed state; ``count`` keeps its counts in its
state. When any process dies, every task rolls back to the last completed checkpoint and the
spout reads again from that checkpoint's positions, so the counts of a checkpoint are exactly
the counts of the lines up to its positions. Each count task logs "counted N words" every second.

With ``--mode ATLEAST_ONCE`` the spout instead writes each file's position (only up to the
contiguous acked line) under ``DIR/.heron-py-positions`` and the counts are at least once.
"""

import argparse
import sys
from collections import Counter

from heron_py.connectors.files import FileTailSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.state.stateful_component import StatefulComponent
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class SplitBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        _file, _lineno, line = tup.values
        for w in line.split():
            self.emit([w], anchors=[tup])
        self.ack(tup)


class StatefulCountBolt(Bolt, StatefulComponent):
    outputs = ["word", "count"]

    def init_state(self, stateful_state):
        self.state = stateful_state
        self.counts = Counter(dict(stateful_state.enumerate()))

    def pre_save(self, checkpoint_id):
        for word, n in self.counts.items():
            self.state.put(word, n)

    def initialize(self, config, context):
        if not hasattr(self, "counts"):  # at least once: no state
            self.counts = Counter()

    def process(self, tup):
        self.counts[tup.values[0]] += 1
        self.ack(tup)

    def process_tick(self, tup):
        self.logger.info(f"counted {sum(self.counts.values())} words, {len(self.counts)} distinct")


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--pattern", default="*")
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between checkpoints")
    ap.add_argument("--mode", choices=["EFFECTIVELY_ONCE", "ATLEAST_ONCE"], default="EFFECTIVELY_ONCE")
    args = ap.parse_args(argv)
    b = TopologyBuilder("file_word_count")
    spout = b.add_spout("files", FileTailSpout, par=2, config={
        "files.dir": args.dir, "files.pattern": args.pattern, "files.poll.ms": 200})
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("count", StatefulCountBolt, par=2, inputs={split: Grouping.fields("word")},
               config={"topology.tick.tuple.freq.secs": 1})
    b.set_config({
        "topology.stmgrs": args.containers,
        "topology.reliability.mode": args.mode,
        "topology.stateful.checkpoint.interval.seconds": args.interval,
        "topology.message.timeout.secs": 4,
        "topology.max.spout.pending": 500,
    })
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
