"""Word count, written against heronpy's API exactly as a Heron user would write it.

    heron-py submit local examples/word_count.py -- --sentences 200000

A spout emits sentences of the shared benchmark workload (wc_common.py, a module beside this
file that reaches every container in the topology package), a split bolt (par 2, shuffle)
splits them into words, a count bolt (par 2, fields grouping on "word") counts them and
logs its counts and emits (word, count) for the words that changed, every second (tick
tuples); with --parquet-sink FOLDER a ParquetSink writes those updates. With --sentences N
the spout stops after N sentences; without it, it goes on forever. With --spout-output-bps B its
stream manager reads at most B bytes a second of its output (Heron's topology.component.output.bps).

The same file runs as a batch job on PySpark (the count bolt's last tick emits the totals):

    heron-py batch --input sentence=sentences.txt --output count=counts.parquet examples/word_count.py
"""

import argparse
import sys
from collections import Counter

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class SentenceSpout(Spout):
    outputs = ["sentence"]

    def initialize(self, config, context):
        # imported here, by the spout alone: importing the workload builds its 100,003 sentences
        # (~0.35 s, 11 MB), which no bolt needs (a Storm spout opens its source in open())
        import wc_common

        self.limit = int(config.get("wc.sentences", -1))
        # each spout task emits its own share of sentence indices
        tasks = context.get_component_tasks(context.get_component_id())
        self.step = len(tasks)
        self.i = tasks.index(context.get_task_id())
        self.pool = wc_common.POOL
        self.pool_size = wc_common.POOL_SIZE

    def next_tuple(self):
        i = self.i
        if 0 <= self.limit <= i:
            return
        self.emit([self.pool[i % self.pool_size]])
        self.i = i + self.step


class SplitBolt(Bolt):
    outputs = ["word"]

    def process(self, tup):
        emit = self.emit
        for w in tup.values[0].split():
            emit([w])


class CountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.counts = Counter()
        self.total = 0
        self.changed = set()

    def process(self, tup):
        word = tup.values[0]
        self.counts[word] += 1
        self.total += 1
        self.changed.add(word)

    def process_tick(self, tup):
        # every tick: the new count of each word that changed since the last tick
        for word in self.changed:
            self.emit([word, self.counts[word]])
        self.changed.clear()
        top = ", ".join(f"{w}={c}" for w, c in self.counts.most_common(5))
        self.log(f"counted {self.total} words, {len(self.counts)} distinct; top: {top}")


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=-1)
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--spout-output-bps", type=int, default=-1, metavar="BYTES",
                    help="the spout's output rate limit (Heron's topology.component.output.bps); -1: none")
    ap.add_argument("--parquet-sink", default=None, metavar="FOLDER",
                    help="also write the count updates as Parquet files (heron_py.spark.ParquetSink)")
    args = ap.parse_args(argv)
    builder = TopologyBuilder("word_count")
    spout = builder.add_spout("sentence", SentenceSpout, par=1, config={
        "wc.sentences": args.sentences, "topology.component.output.bps": args.spout_output_bps})
    split = builder.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    count = builder.add_bolt("count", CountBolt, par=2, inputs={split: Grouping.fields("word")},
                             config={"topology.tick.tuple.freq.secs": 1})
    if args.parquet_sink:
        from heron_py.spark import ParquetSink

        builder.add_bolt("sink", ParquetSink, par=1, inputs={count: Grouping.SHUFFLE},
                         config={"heron_py.sink.parquet.path": args.parquet_sink, "topology.tick.tuple.freq.secs": 1})
    builder.set_config({"topology.stmgrs": args.containers})
    return builder


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
