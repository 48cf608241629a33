"""Shell components on the local scheduler (tests/integration/test_shell_components.py).

    heron-py submit local tests/multilang/shell_topology.py -- --sentences 300 [--faults DIR [--all]]

A storm.py sentence spout emits (sid, sentence) with message ids, at least once. Without
--faults, split bolts on storm.py (par 2), storm.js and pystorm (msgpack) each split every
sentence into (word, sid, pos); with --faults DIR, three storm.py split bolts each break the
protocol once (a non-JSON line, an over-size message, silence), leaving marker files in DIR;
with --all as well, the healthy and the faulty ones side by side (topology "shell_all", which
the test launches once for its module: the faulty bolts' failed tuples are replayed to every
split bolt, so the healthy ones see every word too, duplicates allowed). A Python bolt "count"
acks every word; the test reads what it received.
"""

import argparse
import sys
from pathlib import Path

from heron_py.api.shell import ShellBolt, ShellSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

HERE = Path(__file__).resolve().parent  # where the scripts are (the package holds only Python modules)
WORD_FIELDS = ["word", "sid", "pos"]
FAULTS = {"nonjson": {}, "oversize": {"heron_py.shell.max.message.bytes": 65536},
          "silent": {"topology.subprocess.timeout.secs": 2}}


class AckBolt(Bolt):
    def process(self, tup):
        self.ack(tup)


def _splits(args, shell):
    healthy = {"split": ShellBolt.spec(["python3", "splitsentence.py"], outputs=WORD_FIELDS, par=2, config=shell),
               "split_js": ShellBolt.spec(["node", "splitsentence.js"], outputs=WORD_FIELDS, config=shell),
               "split_mp": ShellBolt.spec([sys.executable, "split_pystorm.py"], outputs=WORD_FIELDS, config=shell,
                                          serializer="msgpack")}
    if not args.faults:
        return healthy
    faulty = {f"bad_{mode}": ShellBolt.spec(["python3", "misbehave.py"], outputs=WORD_FIELDS,
                                            config={**shell, **extra, "test.misbehave": mode,
                                                    "test.marker.dir": args.faults})
              for mode, extra in FAULTS.items()}
    return {**healthy, **faulty} if args.all else faulty


def build(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=300)
    ap.add_argument("--faults", default="")
    ap.add_argument("--all", action="store_true", help="with --faults: the healthy split bolts too")
    args = ap.parse_args(argv)
    if args.all and not args.faults:
        ap.error("--all needs --faults DIR (the folder the faulty bolts leave their marker files in)")
    shell = {"heron_py.shell.cwd": str(HERE)}
    b = TopologyBuilder("shell_all" if args.all else "shell_faults" if args.faults else "shell_word_count")
    spout = ShellSpout.spec(["python3", "sentencespout.py"], outputs=["sid", "sentence"], name="sentence",
                            config={**shell, "test.sentences": args.sentences})
    b.add_spec(spout)
    inputs = {}
    for name, spec in _splits(args, shell).items():
        spec.name = name
        spec.inputs = {spout: Grouping.SHUFFLE}
        b.add_spec(spec)
        inputs[spec] = Grouping.fields("word")
    b.add_bolt("count", AckBolt, par=2, inputs=inputs)
    b.set_config({"topology.reliability.mode": "ATLEAST_ONCE", "topology.message.timeout.secs": 6,
                  "topology.max.spout.pending": 100})
    return b


if __name__ == "__main__":
    build(sys.argv[1:]).build_and_submit()
