"""The shared word-count workload as a heronpy Streamlet program with the default config
(operator fusion on, as Flink chains operators), for bench/run.py: the same argv and the same
files as bench/wc_topology.py, so its ``ours()`` runs it by file name.

    python bench/streamlet_wc.py N OUT_DIR on|off [consume|keyed|keyed-repartition|keyed-update|reduce]

source (sentences 0..N-1 of wc_common, 2 partitions, each reading every second sentence from
its partition index, as bytewax's peer's DynamicSource reads one partition per worker)
→ flat_map(str.split) (2 partitions) → repartition(2, by a stable hash of the word) →
to_sink(a counter). With fusion the flat_map runs in the source's task
("generator-1__flatmap-1", over each batch the source takes: only the words cross the wire)
and the sink in the repartition's ("repartition-1__sink-1"). 2 containers. Each source task
writes the wall time of its first sentence to OUT_DIR/spout-<task>; each counting task writes
"total last_update_time" to OUT_DIR/count-<task> every 0.2 s and its counts (JSON) to
count-<task>.counts, from a thread of its own (a sink gets no tick).
With "keyed": flat_map → count_by_key(word, emit="tick", every 50 ms) → to_sink(a sink keeping
the latest count per word): the issue's shape, the engine's keyed count instead of a user's
counter (bytewax's peer counts with count_final). With "keyed-repartition": flat_map →
repartition(2, by word) → count_by_key → the same (combined through the repartition: the
source's task calls by_word and counts per (partition, word); the repartition's task forwards
the triples). With "keyed-update": count_by_key in its default "update" mode (a pair per
word to the sink). With "reduce": map to (word, 1) → reduce_by_key(first, add, value_fn=second,
emit every 50 ms) → the same sink. With "consume": the program as heronpy's own API has a user
write it, flat_map(str.split) → repartition(2, fn) → consume(a function counting into a
Counter): no Sink class (the counting task writes the same files). Note: a Streamlet source
emits untracked tuples (as heronpy's), so "on" changes the mode, not what is acked.
"""

import functools
import json
import os
import sys
import threading
import time
import zlib
from collections import Counter

from heronpy.streamlet.builder import Builder
from heronpy.streamlet.config import Config
from heronpy.streamlet.generator import Generator
from heronpy.streamlet.runner import Runner
from heronpy.streamlet.sink import Sink


class Sentences(Generator):
    def __init__(self, n, out_dir):
        self.n, self.out_dir = n, out_dir

    def setup(self, context):
        import wc_common  # the 11 MB pool: in the source's task only

        self.pool, self.size = wc_common.POOL, wc_common.POOL_SIZE
        # this partition's sentences: index, index + partitions, ...
        self.i = context.get_partition_index()
        self.step = context.get_num_partitions()
        self.out = os.path.join(self.out_dir, f"spout-{context.get_task_id()}")
        self.started = False

    def get(self):
        i = self.i
        if i >= self.n:
            return None
        if not self.started:
            self.started = True
            with open(self.out, "w") as f:
                f.write(repr(time.time()))
        self.i = i + self.step
        return self.pool[i % self.size]


def by_word(word, n):
    """A hash every process agrees on (str's hash() differs between processes)."""
    return zlib.crc32(word.encode()) % n


class CountSink(Sink):
    def __init__(self, out_dir):
        self.out_dir = out_dir

    def setup(self, context):
        self.counts = Counter()
        self.total = 0
        self.last = 0.0
        self.out = os.path.join(self.out_dir, f"count-{context.get_task_id()}")
        threading.Thread(target=self._report, daemon=True).start()

    def put(self, word):
        self.counts[word] += 1
        self.total += 1
        self.last = time.time()  # as wc_topology.py's count bolt: the last word's time

    def _report(self):
        dumped = -1
        while True:
            time.sleep(0.2)
            total, last = self.total, self.last
            if total != dumped:
                try:
                    counts = dict(self.counts)  # the task's thread may grow it meanwhile
                except RuntimeError:
                    continue
                if sum(counts.values()) != total:
                    continue
                with open(self.out + ".counts.tmp", "w") as f:
                    json.dump(counts, f)
                os.replace(self.out + ".counts.tmp", self.out + ".counts")
                dumped = total
            with open(self.out + ".tmp", "w") as f:
                f.write(f"{total} {last!r}")
            os.replace(self.out + ".tmp", self.out)


class TotalSink(CountSink):
    """The keyed shape's sink: (word, count so far) pairs from count_by_key's ticks, the latest
    per word kept; the same files as CountSink (the total is the sum of the latest counts)."""

    def put(self, pair):
        word, n = pair
        self.total += n - self.counts[word]
        self.counts[word] = n
        self.last = time.time()  # when the count that completed the total reached the sink


_COUNTER = None  # consume's counter: one per counting task (a process of its own)


def count_word(out_dir, w):
    """The "consume" shape's function (bound to OUT_DIR with functools.partial): what a user
    passes to consume() to count words, a Counter made at the first word."""
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = _ConsumeCounter(out_dir)
    _COUNTER.put(w)


class _ConsumeCounter(CountSink):
    """CountSink's counting and files for consume(), which gets no context: the task id is
    the process id (one task per process)."""

    def __init__(self, out_dir):
        super().__init__(out_dir)
        self.setup(type("Ctx", (), {"get_task_id": staticmethod(os.getpid)})())


def word(w):
    return w


def one(w):
    return (w, 1)


def first(pair):
    return pair[0]


def second(pair):
    return pair[1]


def add(a, b):
    return a + b


def by_pair_key(pair, n):
    """A (word, count) pair's sink task: every update of one word reaches the same sink."""
    return by_word(pair[0], n)


if __name__ == "__main__":
    n, out_dir, acking = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "on"
    shape = sys.argv[4] if len(sys.argv) > 4 else "sink"
    keyed = shape in ("keyed", "keyed-repartition", "keyed-update", "reduce")
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    builder = Builder()
    words = builder.new_source(Sentences(n, out_dir)).set_num_partitions(2).flat_map(str.split)
    if keyed:
        # the shape: the engine's keyed count (per batch), which emits the keys that
        # changed every 50 ms; each word's updates go to one sink task, which keeps its latest count
        if shape == "keyed-repartition":  # an explicit repartition by word first
            words = words.repartition(2, by_word)
        # "keyed-update": Heron's default emit, a (word, count) update per word
        emit = {"emit": "tick", "tick_secs": 0.05} if shape != "keyed-update" else {}
        if shape == "reduce":  # reduce_by_key over (word, 1) pairs, as a bytewax user writes it
            counted = words.map(one).reduce_by_key(first, add, value_fn=second, **emit)
        else:
            counted = words.count_by_key(word, **emit)
        counted.set_num_partitions(2).repartition(2, by_pair_key).to_sink(TotalSink(out_dir))
    elif shape == "consume":
        words.repartition(2, by_word).consume(functools.partial(count_word, out_dir))
    else:
        words.repartition(2, by_word).to_sink(CountSink(out_dir))
    config = Config({"topology.max.spout.pending": 5000} if acking else {})
    config.set_num_containers(2)
    if acking:
        config.set_delivery_semantics(Config.ATLEAST_ONCE)
    Runner().run("bench_wc", config, builder)
