"""A word count at least once whose input rate follows a schedule: the health manager's
scenario (tests/integration/test_autoscale.py, bench/autoscale_trace.py).

    heron-py submit local stepped_word_count.py -- --offsets /tmp/wc.offset
    heron-py autoscale local stepped_word_count

The spout's input is a log of sentences arriving at the schedule's rates: ``OFFSET:RATE,...``,
each from OFFSET seconds after ``--epoch`` (the submit's time by default), RATE sentences per
second (by default 1x, 4x, 1x: ``SCHEDULE``). The spout emits what has arrived and, like a
reader of a log with committed offsets, commits the first sentence not acked yet to the
``--offsets`` file: a spout that restarts (an update restarts every container) reads on from
there, so nothing is lost and what was in flight comes again (at least once). Sentence ``sid``
has 10 words; each goes on with its (sid, position), so a test can check that every sentence's
words were counted, and with ``--pad-bytes`` of padding, so that a backlog fills the buffers
(and holds the spout back) soon. The topology's config carries the health manager's settings
for the scenario (``AUTOSCALE``).

The count bolt takes ``--cost-ms`` per word (a sleep: a remote store's round trip, not CPU), so
one task counts about 1000 / cost words per second whatever the machine's cores, and more
tasks count more.
"""

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.state.stateful_component import StatefulComponent
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

# the scenario (tests/integration/test_autoscale.py, bench/autoscale_trace.py): 15 sentences/s,
# 4x from STEP_UP_S seconds after the epoch, 1x again from STEP_DOWN_S; the 4x phase is long
# enough for a machine whose other jobs slow the rescales to still drain the backlog they leave
STEP_UP_S, STEP_DOWN_S = 25.0, 120.0
SCHEDULE = f"0:15,{STEP_UP_S:g}:60,{STEP_DOWN_S:g}:15"
# the health manager's settings for it: a decision every 3 s over 4 s windows, 4 s of cooldown,
# count between 1 and 4 tasks; at 1x on 2 tasks count is ~30% busy, under the idle threshold
AUTOSCALE = {
    "heron_py.autoscale.enabled": True,
    "heron_py.autoscale.interval.secs": 3,
    "heron_py.autoscale.window.secs": 4,
    "heron_py.autoscale.cooldown.secs": 4,
    "heron_py.autoscale.max.parallelism": "count:4",
    "heron_py.autoscale.idle.threshold": 0.4,
    "heron_py.autoscale.blacklist.secs": 30,
}
VOCABULARY = 1000  # distinct words: enough that a fields grouping spreads them evenly over a few tasks
WORDS_PER_SENTENCE = 10
MAX_BURST = 100  # sentences per next_tuple call at most: a late spout catches up smoothly
COMMIT_EVERY_S = 0.5


def sentence(sid):
    return " ".join(f"w{(sid * WORDS_PER_SENTENCE + pos) * 2654435761 % 2**32 % VOCABULARY}"
                    for pos in range(WORDS_PER_SENTENCE))


def parse_schedule(text):
    """'0:15,20:60' as [(0.0, 15.0), (20.0, 60.0)], by offset."""
    out = []
    for item in text.split(","):
        offset, _, rate = item.partition(":")
        out.append((float(offset), float(rate)))
    return sorted(out)


def rate_at(schedule, elapsed):
    """Sentences per second arriving ``elapsed`` seconds after the epoch."""
    rate = 0.0
    for offset, r in schedule:
        if elapsed >= offset:
            rate = r
    return rate


def arrived(schedule, elapsed):
    """Sentences arrived ``elapsed`` seconds after the epoch: the schedule's rates integrated."""
    total = 0.0
    for i, (offset, rate) in enumerate(schedule):
        end = schedule[i + 1][0] if i + 1 < len(schedule) else float("inf")
        if elapsed > offset:
            total += rate * (min(elapsed, end) - offset)
    return int(total)


class SteppedSentenceSpout(Spout):
    outputs = ["sid", "sentence"]

    def initialize(self, config, context):
        self.schedule = parse_schedule(config["wc.schedule"])
        self.epoch = float(config["wc.epoch"])
        self.offsets = Path(config["wc.offsets"])
        self.committed = int(self.offsets.read_text()) if self.offsets.exists() else 0
        self.next_sid = self.committed
        self.acked = set()  # acked sentences past the committed one
        self.replay = []
        self.last_commit = time.monotonic()
        self.log(f"starting at sentence {self.next_sid}")

    def next_tuple(self):
        now = time.monotonic()
        if now - self.last_commit >= COMMIT_EVERY_S:
            self._commit()
            self.last_commit = now
        if self.replay:
            sid = self.replay.pop()
            self.emit([sid, sentence(sid)], tup_id=sid)
            return
        # nothing due: return at once, so the engine's idle wait (not this call) takes the time
        due = arrived(self.schedule, time.time() - self.epoch)
        n = 0
        while self.next_sid < due and n < MAX_BURST:
            self.emit([self.next_sid, sentence(self.next_sid)], tup_id=self.next_sid)
            self.next_sid += 1
            n += 1

    def ack(self, tup_id):
        if tup_id < self.committed:
            return  # a replay's second ack
        self.acked.add(tup_id)
        while self.committed in self.acked:
            self.acked.remove(self.committed)
            self.committed += 1

    def fail(self, tup_id):
        if tup_id >= self.committed and tup_id not in self.acked:
            self.replay.append(tup_id)

    def _commit(self):
        tmp = self.offsets.with_name(self.offsets.name + ".tmp")
        tmp.write_text(str(self.committed))
        os.replace(tmp, self.offsets)


class CheckpointedSteppedSpout(Spout, StatefulComponent):
    """Effectively once (``--effectively-once``): the same arrivals, the next sentence in the
    checkpointed state instead of an offsets file; after a restore it reads on from there."""

    outputs = ["sid", "sentence"]

    def init_state(self, stateful_state):
        self.state = stateful_state
        self.next_sid = stateful_state.get("next") or 0

    def pre_save(self, checkpoint_id):
        self.state.put("next", self.next_sid)

    def initialize(self, config, context):
        self.schedule = parse_schedule(config["wc.schedule"])
        self.epoch = float(config["wc.epoch"])
        self.log(f"starting at sentence {self.next_sid}")

    def next_tuple(self):
        due = arrived(self.schedule, time.time() - self.epoch)
        n = 0
        while self.next_sid < due and n < MAX_BURST:
            self.emit([self.next_sid, sentence(self.next_sid)])
            self.next_sid += 1
            n += 1


class SplitBolt(Bolt):
    outputs = ["word", "sid", "pos", "pad"]

    def initialize(self, config, context):
        self.pad = "." * int(config.get("wc.pad.bytes", 0))

    def process(self, tup):
        sid, text = tup.values
        for pos, w in enumerate(text.split()):
            self.emit([w, sid, pos, self.pad], anchors=[tup])
        self.ack(tup)


class SlowCountBolt(Bolt):
    outputs = ["word", "count"]

    def initialize(self, config, context):
        self.cost_s = float(config.get("wc.cost.ms", 4.0)) / 1000.0
        self.counts = Counter()

    def process(self, tup):
        time.sleep(self.cost_s)
        self.counts[tup.values[0]] += 1
        self.ack(tup)


class CheckpointedCountBolt(SlowCountBolt, StatefulComponent):
    """Effectively once: the counts are the task's state, keyed by the word the fields grouping
    routes by, so a rescale splits them by key group."""

    def init_state(self, stateful_state):
        self.state = stateful_state
        self.restored = Counter(dict(stateful_state.enumerate()))

    def initialize(self, config, context):
        super().initialize(config, context)
        self.counts = self.restored

    def pre_save(self, checkpoint_id):
        for word, n in self.counts.items():
            self.state.put(word, n)

    def process(self, tup):
        time.sleep(self.cost_s)
        self.counts[tup.values[0]] += 1


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--schedule", default=SCHEDULE, help="OFFSET:RATE,... sentences per second from OFFSET "
                                                         "seconds after the epoch")
    ap.add_argument("--epoch", type=float, default=None, help="the schedule's time 0 (default: now)")
    ap.add_argument("--offsets", default="", help="the file the spout commits its offset to (at least once)")
    ap.add_argument("--cost-ms", type=float, default=4.0, help="the count bolt's time per word")
    ap.add_argument("--pad-bytes", type=int, default=400, help="bytes each word carries along")
    ap.add_argument("--name", default="stepped_word_count")
    ap.add_argument("--engine-buffers", action="store_true",
                    help="the engine's default watermarks and input queue (a backlog of megabytes: "
                         "bench/restore_backlog.py), not the small ones below")
    ap.add_argument("--effectively-once", action="store_true",
                    help="checkpointed state (a checkpoint a second) instead of acks and an offsets file")
    args = ap.parse_args(argv)
    eo = args.effectively_once
    b = TopologyBuilder(args.name)
    spout = b.add_spout("sentence", CheckpointedSteppedSpout if eo else SteppedSentenceSpout, par=1, config={
        "wc.schedule": args.schedule, "wc.epoch": time.time() if args.epoch is None else args.epoch,
        "wc.offsets": args.offsets})
    split = b.add_bolt("split", SplitBolt, par=1, inputs={spout: Grouping.SHUFFLE},
                       config={"wc.pad.bytes": args.pad_bytes})
    b.add_bolt("count", CheckpointedCountBolt if eo else SlowCountBolt, par=1, inputs={split: Grouping.fields("word")},
               config={"wc.cost.ms": args.cost_ms})
    b.set_config({
        "topology.stmgrs": 1,
        "topology.reliability.mode": "EFFECTIVELY_ONCE" if eo else "ATLEAST_ONCE",
        **({"topology.stateful.checkpoint.interval.seconds": 1} if eo else {}),
        "topology.message.timeout.secs": 60,
        # backpressure, not the pending cap, holds a spout whose count bolt falls behind: a cap
        # would hold it where the health manager sees a spout running freely at the rate let through
        "topology.max.spout.pending": 20000,
        "topology.metrics.export.interval.secs": 1,
        # a count bolt falling behind holds the spout back within a second or two (backpressure),
        # rather than after a backlog of minutes: words of 0.4 KB, small watermarks, and a short
        # input queue in each task (4 batches, not 64)
        **({} if args.engine_buffers else {
            "heron.streammgr.network.backpressure.highwatermark.mb": 0.1,
            "heron.streammgr.network.backpressure.lowwatermark.mb": 0.05,
            "heron_py.instance.inbound.queue.batches": 4,
        }),
        **AUTOSCALE,
    })
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
