"""The word count at a fixed input rate, measuring latency the way the shared peers do
(../shared/bench/peers/bench_latency.py).

Spout (par 1): sentence i is scheduled at ``t0 + i / rate`` (t0: the spout's first call).
As the shared peers' source (bench_latency.py: "every --tick-ms it wakes and emits all
sentences that are due, so the source runs on a fixed 1 ms grid"), the spout emits on a grid of
``bench.tick.ms`` (default 1): a call before the next grid point emits nothing (the engine then
waits, as Storm's spout wait strategy does), a call after it emits everything due. Each
sentence carries its *scheduled* time ``ts``, so a spout that falls behind, or waits for the
grid, shows as latency. (Before, every call emitted what was due, so next_tuple ran back to
back, one sentence per call: 52 % of a core spent polling at 66,000 sentences/s.)
Split (par 2, shuffle) emits (word, ts). Count (par 2, fields on word) keeps a running count
per word and is the sink: for every update it records ``now - ts``. Only updates that reach it
inside [t0 + warmup, t0 + warmup + window) count. With acking, the spout also records the
complete latency (emit to ack).

Clocks: time.monotonic(), which is CLOCK_MONOTONIC, the same in every process on a machine.
Histograms: 10 us buckets below 1 s, 1 ms buckets above; each task writes its histogram
as JSON to bench.dir when the window has closed; bench/run.py merges and summarises them.
"""

import json
import os
import sys
import time
from collections import Counter

import wc_common

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

FINE = 100_000  # buckets per second below 1 s (10 us)
COARSE = 1000  # buckets per second above 1 s (1 ms)
mono = time.monotonic


class Hist:
    """A latency histogram, as the shared peers' LatRecorder keeps it: a list of 10 us buckets
    below 1 s, 1 ms buckets above, the exact max. ``add``'s common case is inlined in CountSink.process
    (one list increment per update: the recorder's cost per word is part of what the sink
    task spends, and a Counter and a method call per word had cost the sink a quarter of its
    CPU). The mean comes from the buckets' midpoints (10 us resolution below 1 s)."""

    def __init__(self):
        self.fine = [0] * FINE
        self.coarse = Counter()
        self.max = 0.0

    def add(self, lat):
        k = int(lat * FINE)
        if 0 <= k < FINE:
            self.fine[k] += 1
        else:
            self.coarse[max(0, int(lat * COARSE))] += 1
        if lat > self.max:
            self.max = lat

    def dump(self, path, **extra):
        fine = {k: c for k, c in enumerate(self.fine) if c}
        n = sum(fine.values()) + sum(self.coarse.values())
        mean_sum = (sum((k + 0.5) / FINE * c for k, c in fine.items())
                    + sum((k + 0.5) / COARSE * c for k, c in self.coarse.items()))
        doc = {"fine": fine, "coarse": self.coarse, "n": n, "sum": mean_sum, "max": self.max, **extra}
        with open(path + ".tmp", "w") as f:
            json.dump(doc, f)
        os.replace(path + ".tmp", path)


def _t0(bench_dir):
    """The spout's start time, written once by the spout; None until then."""
    try:
        with open(os.path.join(bench_dir, "t0")) as f:
            return float(f.read())
    except (FileNotFoundError, ValueError):
        return None


class PacedSpout(Spout):
    outputs = ["sentence", "ts"]

    def initialize(self, config, context):
        self.rate = float(config["bench.rate"])
        self.warmup = float(config["bench.warmup"])
        self.window = float(config["bench.window"])
        self.dir = config["bench.dir"]
        self.acking = config.get("topology.reliability.mode") == "ATLEAST_ONCE"
        self.tick = float(config.get("bench.tick.ms", 1.0)) / 1000.0
        self.next_tick = 0.0
        self.t0 = None
        self.i = 0
        self.pending = {}
        self.hist = Hist()
        self.dumped = False
        self.pool, self.size = wc_common.POOL, wc_common.POOL_SIZE

    def next_tuple(self):
        now = mono()
        if self.t0 is None:
            self.t0 = now
            with open(os.path.join(self.dir, "t0.tmp"), "w") as f:
                f.write(repr(now))
            os.replace(os.path.join(self.dir, "t0.tmp"), os.path.join(self.dir, "t0"))
        if now < self.next_tick:
            return
        t0, rate, tick = self.t0, self.rate, self.tick
        self.next_tick = t0 + (int((now - t0) / tick) + 1) * tick
        due = int((now - t0) * rate)
        i = self.i
        emit = self.emit
        while i <= due:
            ts = t0 + i / rate
            if self.acking:
                self.pending[i] = ts
                emit([self.pool[i % self.size], ts], tup_id=i)
            else:
                emit([self.pool[i % self.size], ts])
            i += 1
        self.i = i
        if not self.dumped and now >= t0 + self.warmup + self.window + 1.0:
            self.dumped = True
            self.hist.dump(os.path.join(self.dir, "spout.json"), emitted=i)

    def ack(self, tup_id):
        ts = self.pending.pop(tup_id, None)
        if ts is not None:
            now = mono()
            w0 = self.t0 + self.warmup
            if w0 <= now < w0 + self.window:
                self.hist.add(now - ts)

    def fail(self, tup_id):
        self.pending.pop(tup_id, None)


class SplitBolt(Bolt):
    outputs = ["word", "ts"]

    def initialize(self, config, context):
        self.acking = config.get("topology.reliability.mode") == "ATLEAST_ONCE"

    def process(self, tup):
        sentence, ts = tup.values
        emit = self.emit
        if self.acking:
            for w in sentence.split():
                emit([w, ts], anchors=[tup])
            self.ack(tup)
        else:
            for w in sentence.split():
                emit([w, ts])


class CountSink(Bolt):
    outputs = []

    def initialize(self, config, context):
        self.dir = config["bench.dir"]
        self.warmup = float(config["bench.warmup"])
        self.window = float(config["bench.window"])
        self.acking = config.get("topology.reliability.mode") == "ATLEAST_ONCE"
        self.path = os.path.join(self.dir, f"count-{context.get_task_id()}.json")
        self.counts = Counter()
        self.hist = Hist()
        self.fine = self.hist.fine
        # the window is empty until the spout's t0 is known (read on a tick, not per update)
        self.w0, self.w1 = float("inf"), float("-inf")
        self.total = 0
        self.dumped = False

    def process(self, tup):
        word, ts = tup.values
        self.counts[word] += 1  # the running count: one update per word
        now = mono()
        if self.w0 <= now < self.w1:
            lat = now - ts
            k = int(lat * FINE)
            if 0 <= k < FINE:
                self.fine[k] += 1
                if lat > self.hist.max:
                    self.hist.max = lat
            else:
                self.hist.add(lat)  # above 1 s: a coarse bucket, and the max
        self.total += 1
        if self.acking:
            self.ack(tup)

    def process_tick(self, tup):
        if self.w1 == float("-inf"):
            t0 = _t0(self.dir)
            if t0 is not None:
                self.w0, self.w1 = t0 + self.warmup, t0 + self.warmup + self.window
        elif not self.dumped and mono() >= self.w1 + 0.5:
            self.dumped = True
            self.hist.dump(self.path, total=self.total, window=[self.w0, self.w1])


def build(rate, bench_dir, acking, warmup, window):
    b = TopologyBuilder("bench_latency")
    s = b.add_spout("sentence", PacedSpout, par=1)
    sp = b.add_bolt("split", SplitBolt, par=2, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("count", CountSink, par=2, inputs={sp: Grouping.fields("word")},
               config={"topology.tick.tuple.freq.secs": 0.2})
    cfg = {"topology.stmgrs": 2, "bench.rate": rate, "bench.dir": bench_dir, "bench.warmup": warmup,
           "bench.window": window}
    if acking:
        cfg.update({"topology.reliability.mode": "ATLEAST_ONCE", "topology.max.spout.pending": 100_000,
                    "topology.message.timeout.secs": 60})
    b.set_config(cfg)
    return b


if __name__ == "__main__":
    rate, out_dir, acking, warmup, window = sys.argv[1:6]
    build(float(rate), out_dir, acking == "on", float(warmup), float(window)).build_and_submit()
