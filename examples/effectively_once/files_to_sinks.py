"""Effectively once to the end: lines of growing files, split into words, written exactly once
into a PostgreSQL table and into part files, through kill -9 of any task and a server restart.

    mkdir -p /tmp/eo-in && for i in $(seq 1000); do echo "the quick brown fox $i" >> /tmp/eo-in/a.txt; done
    heron-py submit local examples/effectively_once/files_to_sinks.py -- --dir /tmp/eo-in \\
        --postgres postgresql://user:password@127.0.0.1:5432/db --table words --out /tmp/eo-out
    psql ... -c "SELECT count(*) FROM words"      # one row per word of every line, never two
    cat /tmp/eo-out/part-*                          # the same words, one per line

The table needs no key: ``PostgresInsertBolt`` writes a checkpoint's rows once that checkpoint is
complete, in one transaction with its task's row in ``heron_py_sink_progress``, so a replay after
a failure writes nothing twice. ``FileSink`` writes each complete checkpoint's lines to a file
named after it (``part-words_out-TASK-CHECKPOINT-K``), renamed into place whole. Output appears a
checkpoint interval (``--interval``) after its input: the price of exactly once at the sink.
"""

import argparse
import sys

from heron_py.connectors.files import FileSink, FileTailSpout
from heron_py.connectors.postgres import PostgresInsertBolt
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class SplitBolt(Bolt):
    outputs = ["file", "lineno", "pos", "word"]

    def process(self, tup):
        file, lineno, line = tup.values
        for pos, word in enumerate(line.split()):
            self.emit([file, lineno, pos, word], anchors=[tup])
        self.ack(tup)


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True, help="the folder of input files")
    ap.add_argument("--pattern", default="*")
    ap.add_argument("--postgres", required=True, help="postgresql://user:password@host:port/db")
    ap.add_argument("--table", default="words", help="columns file, lineno, pos, word (made if missing)")
    ap.add_argument("--out", required=True, help="the folder of the part files")
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=1.0, help="seconds between checkpoints")
    ap.add_argument("--mode", choices=["EFFECTIVELY_ONCE", "ATLEAST_ONCE"], default="EFFECTIVELY_ONCE",
                    help="ATLEAST_ONCE: each batch written as it fills and acked (replays written again)")
    args = ap.parse_args(argv)
    b = TopologyBuilder("files_to_sinks")
    spout = b.add_spout("lines", FileTailSpout, par=2, config={
        "files.dir": args.dir, "files.pattern": args.pattern, "files.poll.ms": 200})
    split = b.add_bolt("split", SplitBolt, par=2, inputs={spout: Grouping.SHUFFLE})
    b.add_bolt("words_db", PostgresInsertBolt, par=2, inputs={split: Grouping.SHUFFLE}, config={
        "postgres.url": args.postgres, "postgres.table": args.table})
    b.add_bolt("words_out", FileSink, par=2, inputs={split: Grouping.SHUFFLE}, config={
        "files.out.dir": args.out, "files.out.separator": " "})
    b.set_config({
        "topology.stmgrs": args.containers,
        "topology.reliability.mode": args.mode,
        "topology.stateful.checkpoint.interval.seconds": args.interval,
    })
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
