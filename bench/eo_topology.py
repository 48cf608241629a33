"""bench/eo_bench.py's topology: the stateful word count (a replayable spout, split, a stateful
count with par 2) on 2 containers, in the reliability mode and checkpoint interval given.

    heron-py submit local bench/eo_topology.py MODE INTERVAL SENTENCES OUT_DIR

The spout writes OUT_DIR/start at its first emit; each count task appends its total to
OUT_DIR/count-TASK when it changes by the end, and the bench adds them up: words/s is the
input's words over (the time the counts reached every word - start)."""

import sys
import time
from collections import Counter
from pathlib import Path

import wc_common

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.state.stateful_component import StatefulComponent
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class Sentences(Spout, StatefulComponent):
    outputs = ["sentence"]

    def init_state(self, stateful_state):
        self.state = stateful_state
        self.pos = stateful_state.get("pos") or 0

    def pre_save(self, checkpoint_id):
        self.state.put("pos", self.pos)

    def initialize(self, config, context):
        self.pos = getattr(self, "pos", 0)  # ATMOST_ONCE: no init_state
        self.limit = int(config["bench.sentences"])
        self.out = Path(config["bench.out"])

    def next_tuple(self):
        if self.pos >= self.limit:
            time.sleep(0.001)
            return
        if self.pos == 0:
            (self.out / "start").write_text(repr(time.time()))
        self.emit([wc_common.sentence(self.pos)])
        self.pos += 1


class Split(Bolt):
    outputs = ["word"]

    def process(self, tup):
        for w in tup.values[0].split():
            self.emit([w])


class Count(Bolt, StatefulComponent):
    outputs = []

    def init_state(self, stateful_state):
        self.state = stateful_state
        self.counts = Counter(dict(stateful_state.enumerate()))

    def pre_save(self, checkpoint_id):
        for k, v in self.counts.items():
            self.state.put(k, v)

    def initialize(self, config, context):
        self.counts = getattr(self, "counts", Counter())
        self.file = Path(config["bench.out"]) / f"count-{context.get_task_id()}"
        self.words = sum(self.counts.values())
        self.every = int(config["bench.sentences"]) // 20 or 1

    def process(self, tup):
        self.counts[tup.values[0]] += 1
        self.words += 1
        if self.words % self.every == 0:
            self._note()

    def process_tick(self, tup):
        self._note()

    def _note(self):
        with self.file.open("a") as f:
            f.write(f"{time.time()!r} {self.words}\n")


mode, interval, n, out = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
b = TopologyBuilder("bench_eo")
s = b.add_spout("sentence", Sentences, par=1)
split = b.add_bolt("split", Split, par=2, inputs={s: Grouping.SHUFFLE})
b.add_bolt("count", Count, par=2, inputs={split: Grouping.fields("word")},
           config={"topology.tick.tuple.freq.secs": 0.05})
b.set_config({"bench.sentences": n, "bench.out": out, "topology.stmgrs": 2, "topology.reliability.mode": mode,
              "topology.stateful.checkpoint.interval.seconds": interval,
              # each run counts from nothing (checkpoints of the previous run of this name stay)
              "topology.stateful.start.clean": True})
b.build_and_submit()
