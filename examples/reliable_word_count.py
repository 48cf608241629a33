"""Word count in at-least-once mode: nothing is lost when an instance or a stream manager dies.

    heron-py submit local examples/reliable_word_count.py -- --sentences 20000

The spout emits sentence i with message id i and re-emits it when it fails or times out.
With ``--until-file FILE`` the input has no set end: it goes on (at ``--rate``) until FILE holds
the number of sentences to end at (a run that lasts as long as its operator, or a test, needs).
The split bolt emits each word anchored to its sentence, with (sentence id, position), and
acks the sentence. The count bolt counts each (sentence id, position) once — a replayed
sentence brings duplicates, which it recognises — and acks every word. The spout logs
"all N sentences acked" once every message id has been acked exactly once.
"""

import argparse
import sys
import time
from collections import Counter

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class ReplayingSentenceSpout(Spout):
    outputs = ["sid", "sentence"]

    def initialize(self, config, context):
        # imported here, by the spout alone: importing the workload builds its 100,003 sentences
        # (~0.35 s, 11 MB), which no bolt needs (a Storm spout opens its source in open())
        import wc_common

        self.sentence = wc_common.sentence
        self.limit = int(config.get("wc.sentences", 10000))
        self.rate = float(config.get("wc.rate", 0))  # sentences per second; 0: as fast as allowed
        # an open-ended input: no limit until this file names one (looked at every 0.2 s)
        self.until = config.get("wc.until.file") or None
        if self.until:
            self.limit = None
        self.next_look = 0.0
        self.refused = None  # the until file's last content that was not a number
        self.started = time.monotonic()
        self.next_id = 0
        self.replay = []
        self.acked = set()
        self.replays = 0

    def next_tuple(self):
        if self.limit is None:
            self._look_for_the_end()
        if self.replay:
            sid = self.replay.pop()
            self.replays += 1
        elif self.limit is None or self.next_id < self.limit:
            if self.rate and self.next_id > (time.monotonic() - self.started) * self.rate:
                time.sleep(0.001)
                return
            sid = self.next_id
            self.next_id += 1
        else:
            return
        self.emit([sid, self.sentence(sid)], tup_id=sid)

    def _look_for_the_end(self):
        now = time.monotonic()
        if now < self.next_look:
            return
        self.next_look = now + 0.2
        try:
            with open(self.until) as f:
                text = f.read().strip()
        except OSError:
            return
        if not text:
            return
        if not text.isdigit():
            if text != self.refused:  # said once per content, looked at again every 0.2 s
                self.refused = text
                self.log(f"--until-file {self.until}: expected the number of sentences to end at, "
                         f"found {text[:40]!r}")
            return
        self.limit = max(int(text), self.next_id)  # what was emitted already is kept
        self.log(f"the input ends at {self.limit} sentences")
        self._all_acked()

    def ack(self, tup_id):
        if tup_id in self.acked:
            self.log(f"DUPLICATE ACK of sentence {tup_id}")
        self.acked.add(tup_id)
        self._all_acked()

    def _all_acked(self):
        if len(self.acked) == self.limit:
            self.log(f"all {self.limit} sentences acked ({self.replays} replays)")

    def fail(self, tup_id):
        if tup_id in self.acked:
            self.log(f"FAIL AFTER ACK of sentence {tup_id}")
            return
        self.replay.append(tup_id)


class SplitBolt(Bolt):
    outputs = ["word", "sid", "pos"]

    def initialize(self, config, context):
        # a per-sentence delay makes tuples queue up here (demos and tests of failures)
        self.delay_s = float(config.get("wc.split.delay.ms", 0)) / 1000.0

    def process(self, tup):
        if self.delay_s:
            time.sleep(self.delay_s)
        sid, sentence = tup.values
        for pos, w in enumerate(sentence.split()):
            self.emit([w, sid, pos], anchors=[tup])
        self.ack(tup)


class DedupCountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.seen = set()
        self.counts = Counter()

    def process(self, tup):
        word, sid, pos = tup.values
        if (sid, pos) not in self.seen:
            self.seen.add((sid, pos))
            self.counts[word] += 1
        self.ack(tup)

    def process_tick(self, tup):
        self.log(f"counted {sum(self.counts.values())} words, {len(self.counts)} distinct")


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=10000)
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=10)
    ap.add_argument("--split-delay-ms", type=float, default=0)
    ap.add_argument("--rate", type=float, default=0, help="sentences per second (0: unpaced)")
    ap.add_argument("--until-file", default="",
                    help="no set end: the input goes on until this file holds the number of sentences to end at")
    args = ap.parse_args(argv)
    b = TopologyBuilder("reliable_word_count")
    spout = b.add_spout("sentence", ReplayingSentenceSpout, par=1, config={"wc.sentences": args.sentences,
                                                                            "wc.rate": args.rate,
                                                                            "wc.until.file": args.until_file})
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE},
                       config={"wc.split.delay.ms": args.split_delay_ms})
    b.add_bolt("count", DedupCountBolt, par=2, inputs={split: Grouping.fields("word")},
               config={"topology.tick.tuple.freq.secs": 1})
    b.set_config({
        "topology.stmgrs": args.containers,
        "topology.reliability.mode": "ATLEAST_ONCE",
        "topology.message.timeout.secs": args.timeout,
        "topology.max.spout.pending": 2000,
    })
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
