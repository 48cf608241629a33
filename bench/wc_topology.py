"""The shared word-count workload as a heron-py topology, instrumented for bench/run.py.

Spout: sentences 0..N-1 of wc_common (split across spout tasks by index), with a message id
when acking is on. Only the spout imports wc_common, whose import builds the 11 MB sentence
pool: a bolt never reads it (as a Storm spout opens its source in ``open``). With the config
"bench.pool_in_every_task" each bolt imports it too, as every task did before 2026-11-24 (how
the issue's memory target was first measured; bench/idle_memory.py reports both).
Split (par 2, shuffle) → count (par 2, fields on "word"). The spout writes
the wall time of its first emit; each count task writes "total last_update_time" every
0.2 s, so the runner knows when all 10*N words are counted and when the last one was, and
its counts (JSON) once it has seen no new word for a tick, for the checksum.
"""

import json
import os
import sys
import time
from collections import Counter

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class BenchSpout(Spout):
    outputs = ["sentence"]

    def initialize(self, config, context):
        self.n = int(config["bench.sentences"])
        self.acking = config.get("topology.reliability.mode") == "ATLEAST_ONCE"
        tasks = context.get_component_tasks(context.get_component_id())
        self.i = tasks.index(context.get_task_id())
        self.step = len(tasks)
        self.out = os.path.join(config["bench.dir"], f"spout-{context.get_task_id()}")
        self.started = False
        import wc_common

        self.pool, self.size = wc_common.POOL, wc_common.POOL_SIZE

    def next_tuple(self):
        i = self.i
        if i >= self.n:
            return
        if not self.started:
            self.started = True
            with open(self.out, "w") as f:
                f.write(repr(time.time()))
        if self.acking:
            self.emit([self.pool[i % self.size]], tup_id=i)
        else:
            self.emit([self.pool[i % self.size]])
        self.i = i + self.step


def _pool_in_every_task(config):
    if config.get("bench.pool_in_every_task"):
        import wc_common  # noqa: F401  (what importing it at the file's top cost each task)


class BenchSplit(Bolt):
    outputs = ["word"]

    def initialize(self, config, context):
        _pool_in_every_task(config)
        self.acking = config.get("topology.reliability.mode") == "ATLEAST_ONCE"

    def process(self, tup):
        emit = self.emit
        if self.acking:
            for w in tup.values[0].split():
                emit([w], anchors=[tup])
            self.ack(tup)
        else:
            for w in tup.values[0].split():
                emit([w])


class BenchCount(Bolt):
    outputs = []

    def initialize(self, config, context):
        _pool_in_every_task(config)
        self.counts = Counter()
        self.total = 0
        self.last = 0.0
        self.acking = config.get("topology.reliability.mode") == "ATLEAST_ONCE"
        self.out = os.path.join(config["bench.dir"], f"count-{context.get_task_id()}")

    def process(self, tup):
        self.counts[tup.values[0]] += 1
        self.total += 1
        self.last = time.time()
        if self.acking:
            self.ack(tup)

    def process_tick(self, tup):
        if self.total != getattr(self, "dumped_total", -1):
            with open(self.out + ".counts.tmp", "w") as f:
                json.dump(self.counts, f)
            os.replace(self.out + ".counts.tmp", self.out + ".counts")
            self.dumped_total = self.total
        with open(self.out + ".tmp", "w") as f:
            f.write(f"{self.total} {self.last!r}")
        os.replace(self.out + ".tmp", self.out)


if __name__ == "__main__":
    n, out_dir, acking = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "on"
    everywhere = sys.argv[4:5] == ["pool-in-every-task"]
    b = TopologyBuilder("bench_wc")
    s = b.add_spout("sentence", BenchSpout, par=1)
    sp = b.add_bolt("split", BenchSplit, par=2, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("count", BenchCount, par=2, inputs={sp: Grouping.fields("word")},
               config={"topology.tick.tuple.freq.secs": 0.2})
    cfg = {"topology.stmgrs": 2, "bench.sentences": n, "bench.dir": out_dir, "bench.pool_in_every_task": everywhere}
    if acking:
        cfg.update({"topology.reliability.mode": "ATLEAST_ONCE", "topology.max.spout.pending": 5000})
    b.set_config(cfg)
    b.build_and_submit()
