"""Every split bolt of tests/multilang/shell_topology.py in one topology, healthy and faulty
side by side, so tests/integration/test_shell_components.py launches one topology instead of
two (issue 40).

    heron-py submit local tests/integration/topologies/shell_all.py -- --sentences 200 --faults DIR

A storm.py sentence spout emits (sid, sentence) with message ids, at least once, to: split
bolts on storm.py (par 2), storm.js and pystorm (msgpack), which split every sentence into
(word, sid, pos); and three storm.py split bolts that each break the protocol once (a non-JSON
line, an over-size message, silence), leaving marker files in DIR, are killed and restarted.
A Python bolt "count" acks every word; the test reads what it received per split bolt. The
faulty bolts' failed tuples are replayed to every split bolt: at least once, so the healthy
ones see every word too, duplicates allowed."""

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from heron_py.api.shell import ShellBolt, ShellSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

# where the scripts are (the package holds only Python modules); read at submit, on this machine
MULTILANG = Path(__file__).resolve().parents[2] / "multilang"
WORD_FIELDS = ["word", "sid", "pos"]
FAULTS = {"nonjson": {}, "oversize": {"heron_py.shell.max.message.bytes": 65536},
          "silent": {"topology.subprocess.timeout.secs": 2}}


class AckBolt(Bolt):
    def process(self, tup: Any) -> None:
        self.ack(tup)


def _splits(faults: str, shell: dict[str, Any]) -> dict[str, Any]:
    healthy = {"split": ShellBolt.spec(["python3", "splitsentence.py"], outputs=WORD_FIELDS, par=2, config=shell),
               "split_js": ShellBolt.spec(["node", "splitsentence.js"], outputs=WORD_FIELDS, config=shell),
               "split_mp": ShellBolt.spec([sys.executable, "split_pystorm.py"], outputs=WORD_FIELDS, config=shell,
                                          serializer="msgpack")}
    faulty = {f"bad_{mode}": ShellBolt.spec(["python3", "misbehave.py"], outputs=WORD_FIELDS,
                                            config={**shell, **extra, "test.misbehave": mode,
                                                    "test.marker.dir": faults})
              for mode, extra in FAULTS.items()}
    return {**healthy, **faulty}


def build(argv: Sequence[str]) -> TopologyBuilder:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=300)
    ap.add_argument("--faults", required=True, help="the folder the faulty bolts leave their marker files in")
    args = ap.parse_args(argv)
    shell = {"heron_py.shell.cwd": str(MULTILANG)}
    b = TopologyBuilder("shell_all")
    spout = ShellSpout.spec(["python3", "sentencespout.py"], outputs=["sid", "sentence"], name="sentence",
                            config={**shell, "test.sentences": args.sentences})
    b.add_spec(spout)
    inputs: dict[Any, Any] = {}
    for name, spec in _splits(args.faults, shell).items():
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
