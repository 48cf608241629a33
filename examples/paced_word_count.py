"""Word count fed at a fixed rate, with sentence ids taken from the clock.

    heron-py submit local examples/paced_word_count.py -- --rate 200

Sentence ``sid`` is due at ``epoch + sid / rate``, where ``epoch`` is fixed when the topology
is built. A spout that is restarted (a crash, ``heron-py restart`` or ``update``) resumes at
the sentence that is due now instead of starting over, the way a spout reading a log with
committed offsets would. Each word goes on with its (sid, position), so a test can tell which
sentences were emitted after some moment and check their counts exactly.
"""

import argparse
import sys
import time
from collections import Counter

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

MAX_BURST = 200  # at most this many sentences per next_tuple call, so a late spout catches up smoothly


class PacedSentenceSpout(Spout):
    outputs = ["sid", "sentence"]

    def initialize(self, config, context):
        # imported here, by the spout alone: importing the workload builds its 100,003 sentences
        # (~0.35 s, 11 MB), which no bolt needs (a Storm spout opens its source in open())
        import wc_common

        self.sentence = wc_common.sentence
        self.rate = float(config["wc.rate"])
        self.epoch = float(config["wc.epoch"])
        self.next_sid = max(0, int((time.time() - self.epoch) * self.rate))
        self.log(f"starting at sentence {self.next_sid}")

    def next_tuple(self):
        due = int((time.time() - self.epoch) * self.rate)
        n = 0
        while self.next_sid <= due and n < MAX_BURST:
            self.emit([self.next_sid, self.sentence(self.next_sid)])
            self.next_sid += 1
            n += 1
        if n == 0:
            time.sleep(0.001)


class SplitBolt(Bolt):
    outputs = ["word", "sid", "pos"]

    def process(self, tup):
        sid, sentence = tup.values
        for pos, w in enumerate(sentence.split()):
            self.emit([w, sid, pos])


class CountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.counts = Counter()

    def process(self, tup):
        self.counts[tup.values[0]] += 1

    def process_tick(self, tup):
        self.log(f"counted {sum(self.counts.values())} words, {len(self.counts)} distinct")


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=200.0, help="sentences per second")
    ap.add_argument("--containers", type=int, default=2)
    args = ap.parse_args(argv)
    b = TopologyBuilder("paced_word_count")
    spout = b.add_spout("sentence", PacedSentenceSpout, par=1,
                        config={"wc.rate": args.rate, "wc.epoch": time.time()})
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("count", CountBolt, par=2, inputs={split: Grouping.fields("word")},
               config={"topology.tick.tuple.freq.secs": 1})
    b.set_config({"topology.stmgrs": args.containers})
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
