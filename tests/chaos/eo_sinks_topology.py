"""The effectively-once fault checker's topology with exact sinks (tests/chaos/eo_checker.py
``--sinks``): examples/stateful_word_count.py's replayable spout and stateful count, and every
word of every sentence also written, exactly once, to the sinks the checker started:

- a PostgreSQL table with no key (``PostgresInsertBolt``: a checkpoint's rows and the task's
  progress row in one transaction), one row ``entry`` per word;
- part files (``FileSink``: a file per task and complete checkpoint, renamed into place), one
  line ``entry`` per word;
- a Redis hash (``RedisStoreBolt`` HINCRBY: a checkpoint's commands and the task's progress
  in one MULTI/EXEC), the field ``entry`` incremented by 1 per word.

``entry`` is ``"I:POS:WORD"``: sentence I's word at position POS. Every entry is distinct, so
each sink's output is checked row by row (a row written twice shows as a count of 2, one
dropped as missing) with no key and no de-duplication anywhere; a plain count of words could
hide a duplicate behind a drop of the same word.

    heron-py submit local tests/chaos/eo_sinks_topology.py -- --sentences 20000 --rate 300 \\
        --postgres postgresql://u:p@127.0.0.1:5432/postgres --table eo_rows --out /tmp/eo-out \\
        --redis redis://127.0.0.1:6379/0 --hash eo-rows

Without ``--postgres``, ``--out`` or ``--redis`` that sink is left out.
"""

import argparse
import sys
import time
from pathlib import Path
from typing import Any

# the word count's parts, from examples/ (at submit; in a container the topology package holds
# them, shipped as the imports below name them, and no folder above has them)
_EXAMPLES = next((p / "examples" for p in Path(__file__).resolve().parents
                  if (p / "examples" / "stateful_word_count.py").is_file()), None)
if _EXAMPLES is not None and str(_EXAMPLES) not in sys.path:
    sys.path.insert(0, str(_EXAMPLES))

from stateful_word_count import (  # type: ignore[import-not-found]  # noqa: E402  (examples/, on sys.path above)
    ReplayableSentenceSpout,
    StatefulCountBolt,
)

from heron_py.connectors.files import FileSink  # noqa: E402
from heron_py.connectors.postgres import PostgresInsertBolt  # noqa: E402
from heron_py.connectors.redis import RedisStoreBolt  # noqa: E402
from heronpy.api.bolt.bolt import Bolt  # noqa: E402
from heronpy.api.stream import Grouping  # noqa: E402
from heronpy.api.topology import TopologyBuilder  # noqa: E402


def entry(i: int, pos: int, word: str) -> str:
    """A sink's row: sentence ``i``'s word at ``pos`` (the checker computes the same)."""
    return f"{i}:{pos}:{word}"


class IndexedSentenceSpout(ReplayableSentenceSpout):  # type: ignore[misc]
    """The word count's spout, each sentence emitted with its index (the sinks' rows name it)."""

    outputs = ["i", "sentence"]
    # set by the parent's init_state and initialize
    pos: int
    mine: int
    index: int
    par: int
    rate: float
    window_start: float
    window_pos: int
    done_logged: bool

    def next_tuple(self) -> None:
        # the parent's loop, with the index in the tuple: its position in state is unchanged
        if self.pos >= self.mine:
            if not self.done_logged:
                self.logger.info(f"emitted all {self.mine} sentences")
                self.done_logged = True
            time.sleep(0.001)
            return
        if self.rate and self.pos - self.window_pos > (time.monotonic() - self.window_start) * self.rate:
            time.sleep(0.001)
            return
        i = self.index + self.pos * self.par
        self.emit([i, self.sentence(i)])
        self.pos += 1
        self.done_logged = False


class EntrySplitBolt(Bolt):
    """Each word first (the count's fields grouping and ``tup.values[0]``), then its entry, and
    a 1 for the Redis hash's HINCRBY."""

    outputs = ["word", "entry", "one"]

    def process(self, tup: Any) -> None:
        i, sentence = tup.values
        for pos, word in enumerate(sentence.split()):
            self.emit([word, entry(i, pos, word), 1])


def build(argv: list[str]) -> TopologyBuilder:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=10000)
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between checkpoints")
    ap.add_argument("--rate", type=float, default=0, help="sentences per second per spout task (0: unpaced)")
    ap.add_argument("--postgres", default=None, help="postgresql://user:password@host:port/db")
    ap.add_argument("--table", default="eo_rows", help="a table with a text column entry (no key)")
    ap.add_argument("--out", default=None, help="the folder of the part files")
    ap.add_argument("--redis", default=None, help="redis://host:port/db")
    ap.add_argument("--hash", default="eo-rows", help="the Redis hash: entry -> times written")
    ap.add_argument("--sink-par", type=int, default=2, help="tasks per sink")
    args = ap.parse_args(argv)
    b = TopologyBuilder("eo_sinks_word_count")
    spout = b.add_spout("sentence", IndexedSentenceSpout, par=2,
                        config={"wc.sentences": args.sentences, "wc.rate": args.rate})
    split = b.add_bolt("split", EntrySplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("count", StatefulCountBolt, par=2, inputs={split: Grouping.fields("word")},
               config={"topology.tick.tuple.freq.secs": 1})
    # reconnects capped at 1 s: a sink server back from a restart or a freeze is written to soon
    if args.postgres:
        b.add_bolt("rows_db", PostgresInsertBolt, par=args.sink_par, inputs={split: Grouping.SHUFFLE}, config={
            "postgres.url": args.postgres, "postgres.table": args.table, "postgres.reconnect.max.ms": 1000})
    if args.out:
        b.add_bolt("rows_out", FileSink, par=args.sink_par, inputs={split: Grouping.SHUFFLE}, config={
            "files.out.dir": args.out, "files.out.field": "entry"})
    if args.redis:
        b.add_spec(RedisStoreBolt.spec(name="rows_redis", par=args.sink_par, inputs={split: Grouping.SHUFFLE},
                                       config={"redis.url": args.redis, "redis.data.type": "HINCRBY",
                                               "redis.additional.key": args.hash, "redis.key.field": "entry",
                                               "redis.value.field": "one", "redis.reconnect.max.ms": 1000}))
    b.set_config({
        "topology.stmgrs": args.containers,
        "topology.reliability.mode": "EFFECTIVELY_ONCE",
        "topology.stateful.checkpoint.interval.seconds": args.interval,
    })
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
