"""bench/multilang_bench.py's topology: sentences -> split (VARIANT) -> count, on the local
scheduler.   heron-py submit local bench/multilang_topology.py VARIANT SENTENCES OUT_DIR"""

import sys
from pathlib import Path

import multilang_split  # noqa: F401  (imported here so it ships in the topology package)
from multilang_parts import FIELDS, Count, NativeSplit, Sentences

from heron_py.api.shell import ShellBolt
from heron_py.api.stream import Grouping
from heron_py.api.topology import TopologyBuilder
from heron_py.storm import CLASS_KEY
from heron_py.storm.native import PystormBolt

BENCH = Path(__file__).resolve().parent
MULTILANG = BENCH.parent / "tests" / "multilang"  # storm.py, splitsentence.py, split_pystorm.py


def split_spec(variant):
    if variant == "native":
        return NativeSplit.spec(par=1)
    if variant == "pystorm-native":
        return PystormBolt.spec(par=1, config={CLASS_KEY: "multilang_split:PystormSplit"}, optional_outputs=FIELDS)
    shell = {"heron_py.shell.cwd": str(MULTILANG)}
    if variant in ("storm.py-json", "storm.py-json-nowake"):
        # nowake: the A/B of the reader thread waking the task thread (heron_py.shell.wake)
        cfg = {**shell, "heron_py.shell.wake": variant == "storm.py-json"}
        return ShellBolt.spec(["python3", "splitsentence.py"], outputs=FIELDS, config=cfg)
    if variant == "pystorm-msgpack":
        return ShellBolt.spec([sys.executable, "split_pystorm.py"], outputs=FIELDS, config=shell,
                              serializer="msgpack")
    if variant == "pystorm-json":
        return ShellBolt.spec([sys.executable, "-m", "streamparse.run", "multilang_split.PystormSplit", "-s", "json"],
                              outputs=FIELDS, config={"heron_py.shell.cwd": str(BENCH)})
    raise SystemExit(f"unknown variant {variant}")


variant, n, out = sys.argv[1], sys.argv[2], sys.argv[3]
b = TopologyBuilder("bench_ml")
s = b.add_spout("sentences", Sentences, par=1)
split = split_spec(variant)
split.name, split.inputs = "split", {s: Grouping.SHUFFLE}
b.add_spec(split)
b.add_bolt("count", Count, par=1, inputs={split: Grouping.fields("word")})
b.set_config({"bench.sentences": n, "bench.out": out})
b.build_and_submit()
