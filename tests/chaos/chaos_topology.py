"""The chaos run's topology: an at-least-once word count whose spout and count bolt keep what
they promised on disk, so kill -9 of any of their processes loses nothing it acked.

- The spout emits sentence ``sid`` (0..N-1) with message id ``sid``. Each ack is appended to
  ``<out>/acks-<task>.log`` before anything else, and a restarted spout reads it back: what
  was acked is never emitted again, what was in flight is emitted again. A second ack of an
  id is appended to ``<out>/duplicate-acks.log``.
- The split bolt emits each word anchored to its sentence with (sid, position).
- The count bolt appends "sid pos word" to ``<out>/count-<task>.txt``, flushed to the OS,
  before it acks: an acked word is on disk even if the process dies right after. Replays
  bring duplicates; de-duplicating by (sid, pos) gives the exact counts.
"""

import argparse
import os
import random
import sys
import time

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

_rng = random.Random(7)
VOCAB = ["".join(_rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(_rng.randint(3, 9))) for _ in range(200)]


def sentence(sid):
    """Ten words, a pure function of the id (the check recomputes the plain counts)."""
    r = random.Random(sid)
    return " ".join(r.choice(VOCAB) for _ in range(10))


class DurableSentenceSpout(Spout):
    outputs = ["sid", "sentence"]

    def initialize(self, config, context):
        self.limit = int(config["chaos.sentences"])
        self.rate = float(config.get("chaos.rate", 0))
        out = str(config["chaos.out"])
        self.ack_path = os.path.join(out, f"acks-{context.get_task_id()}.log")
        self.dup_path = os.path.join(out, "duplicate-acks.log")
        self.acked = set()
        if os.path.exists(self.ack_path):
            with open(self.ack_path, encoding="utf-8") as f:
                self.acked = {int(line) for line in f if line.endswith("\n")}
        self.todo = [s for s in range(self.limit - 1, -1, -1) if s not in self.acked]  # popped from the end
        self.replay = []
        self.started = time.monotonic()
        self.emitted = 0
        self.log_file = open(self.ack_path, "a", encoding="utf-8")  # noqa: SIM115 - open for the task's life
        self.log(f"chaos spout: {len(self.acked)} sentences acked before, {len(self.todo)} to go")

    def next_tuple(self):
        if self.replay:
            sid = self.replay.pop()
        elif self.todo:
            if self.rate and self.emitted > (time.monotonic() - self.started) * self.rate:
                time.sleep(0.001)
                return
            sid = self.todo.pop()
            self.emitted += 1
        else:
            return
        self.emit([sid, sentence(sid)], tup_id=sid)

    def ack(self, tup_id):
        if tup_id in self.acked:
            with open(self.dup_path, "a", encoding="utf-8") as f:
                f.write(f"{tup_id}\n")
            return
        self.acked.add(tup_id)
        self.log_file.write(f"{tup_id}\n")
        self.log_file.flush()  # to the OS: a kill -9 of this process cannot lose it
        if len(self.acked) == self.limit:
            self.log(f"all {self.limit} sentences acked")

    def fail(self, tup_id):
        if tup_id not in self.acked:
            self.replay.append(tup_id)


class SplitBolt(Bolt):
    outputs = ["word", "sid", "pos"]

    def process(self, tup):
        sid, text = tup.values
        for pos, w in enumerate(text.split()):
            self.emit([w, sid, pos], anchors=[tup])
        self.ack(tup)


class FileCountBolt(Bolt):
    outputs = []

    def initialize(self, config, context):
        path = os.path.join(str(config["chaos.out"]), f"count-{context.get_task_id()}.txt")
        self.out = open(path, "a", encoding="utf-8")  # noqa: SIM115 - open for the task's life

    def process(self, tup):
        word, sid, pos = tup.values
        self.out.write(f"{sid} {pos} {word}\n")
        self.out.flush()  # before the ack: an acked word is never lost
        self.ack(tup)


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, required=True)
    ap.add_argument("--rate", type=float, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    b = TopologyBuilder("chaos_word_count")
    spout = b.add_spout("sentence", DurableSentenceSpout, par=1,
                        config={"chaos.sentences": args.sentences, "chaos.rate": args.rate, "chaos.out": args.out})
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("count", FileCountBolt, par=2, inputs={split: Grouping.fields("word")},
               config={"chaos.out": args.out})
    b.set_config({
        "topology.stmgrs": 2,
        "topology.reliability.mode": "ATLEAST_ONCE",
        "topology.message.timeout.secs": 4,
        "topology.max.spout.pending": 300,
        "topology.tmanager.standby": "true",
    })
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
