"""Word count in effectively-once mode: exact counts through kill -9 of any process.

    heron-py submit local examples/stateful_word_count.py -- --sentences 20000 --interval 1

No acking and no de-duplication by hand: the engine checkpoints every task's state
(Chandy-Lamport markers, heronpy's StatefulComponent API) and, when any process dies, rolls
every task back to the last completed checkpoint. For that to be exact the spout's source
must be replayable: the spout keeps its read position in its state (``pre_save`` puts it there,
``init_state`` reads it back), so after a restore it reads again from the checkpoint's position.

Each count task logs "counted N words" on its ticks; the spouts log "emitted all K sentences"
when they reached the end of their share. The counts of the last completed checkpoint are the
exact counts of the input once it covers the whole input (the tests read them from the
checkpoint storage).
"""

import argparse
import sys
import time
from collections import Counter

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.state.stateful_component import StatefulComponent
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class ReplayableSentenceSpout(Spout, StatefulComponent):
    """Sentences i = index, index + par, index + 2 par, ... < N: a partition of a replayable source."""

    outputs = ["sentence"]

    def init_state(self, stateful_state):
        self.state = stateful_state
        # the position to read from: the checkpoint's, or the start
        self.pos = stateful_state.get("pos") or 0
        self.logger.info(f"spout restored at position {self.pos}")

    def pre_save(self, checkpoint_id):
        self.state.put("pos", self.pos)

    def initialize(self, config, context):
        # imported here, by the spout alone: importing the workload builds its 100,003 sentences
        # (~0.35 s, 11 MB), which no bolt needs (a Storm spout opens its source in open())
        import wc_common

        self.sentence = wc_common.sentence
        tasks = sorted(context.get_component_tasks(context.get_component_id()))
        self.index, self.par = tasks.index(context.get_task_id()), len(tasks)
        self.limit = int(config.get("wc.sentences", 10000))
        self.rate = float(config.get("wc.rate", 0))  # sentences per second per task; 0: unpaced
        self.mine = len(range(self.index, self.limit, self.par))
        self.window_start, self.window_pos = time.monotonic(), self.pos
        self.done_logged = False

    def next_tuple(self):
        if self.pos >= self.mine:
            if not self.done_logged:
                self.logger.info(f"emitted all {self.mine} sentences")
                self.done_logged = True
            time.sleep(0.001)
            return
        if self.rate and self.pos - self.window_pos > (time.monotonic() - self.window_start) * self.rate:
            time.sleep(0.001)
            return
        self.emit([self.sentence(self.index + self.pos * self.par)])
        self.pos += 1
        self.done_logged = False


class SplitBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for w in tup.values[0].split():
            self.emit([w])


class StatefulCountBolt(Bolt, StatefulComponent):
    outputs = ["word", "count"]

    def init_state(self, stateful_state):
        self.state = stateful_state
        self.counts = Counter(dict(stateful_state.enumerate()))
        self.logger.info(f"count restored with {sum(self.counts.values())} words, {len(self.counts)} distinct")

    def pre_save(self, checkpoint_id):
        for word, n in self.counts.items():
            self.state.put(word, n)

    def initialize(self, config, context):
        pass

    def process(self, tup):
        self.counts[tup.values[0]] += 1

    def process_tick(self, tup):
        self.logger.info(f"counted {sum(self.counts.values())} words, {len(self.counts)} distinct")


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=10000)
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between checkpoints")
    ap.add_argument("--rate", type=float, default=0, help="sentences per second per spout task (0: unpaced)")
    args = ap.parse_args(argv)
    b = TopologyBuilder("stateful_word_count")
    spout = b.add_spout("sentence", ReplayableSentenceSpout, par=2,
                        config={"wc.sentences": args.sentences, "wc.rate": args.rate})
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("count", StatefulCountBolt, par=2, inputs={split: Grouping.fields("word")},
               config={"topology.tick.tuple.freq.secs": 1})
    b.set_config({
        "topology.stmgrs": args.containers,
        "topology.reliability.mode": "EFFECTIVELY_ONCE",
        "topology.stateful.checkpoint.interval.seconds": args.interval,
    })
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
