"""The FileTailSpout's lines/s against a bare loop reading the same file (issue 38's goal for a
source: >= 0.7x its bare loop). The lead runs it:

    .venv/bin/python bench/files_bench.py [--lines 1000000]
    .venv/bin/python bench/files_bench.py --rev REV [--reps 3]   # A/B: the spout at REV vs this tree

It writes one file of --lines lines (~90 bytes each) into a folder, times a bare loop that does
what the spout must do with each line (read it in binary, decode it, make the (file, line
number, text) row the spout emits), then runs a topology FileTailSpout (par 1, ATLEAST_ONCE,
max spout pending 5000, its own defaults otherwise) -> ``Count``, a bolt that counts and acks
each line and writes its count with the times of its first and last line every 0.1 s, on the
local scheduler, and times from the first line counted to the last (submit and start are not
counted). Each run reads the file from its start (a fresh folder of positions). With ``--rev``
the spout runs at a git revision (a worktree, as ``bench/ab.py --rev`` makes it) and at this
tree alternately, beside a bare loop per pair (``connector_common.ab_against_bare``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from connector_common import ab_against_bare, add_ab_args, topology_head  # noqa: E402

TOPOLOGY = topology_head("import json, os, time\nfrom heron_py.connectors.files import FileTailSpout") + '''
class Progress(Count):
    """Count, writing "count, first, last" to a file on every tick (0.1 s)."""
    def initialize(self, config, context):
        super().initialize(config, context)
        self.out, self.first, self.last = config["bench.progress"], None, None
    def process(self, tup):
        now = time.time()
        if self.first is None:
            self.first = now
        self.last = now
        super().process(tup)
    def process_tick(self, tup):
        with open(self.out + ".tmp", "w") as f:
            json.dump([self.n, self.first, self.last], f)
        os.replace(self.out + ".tmp", self.out)

b = TopologyBuilder("files_bench")
spout = b.add_spout("files", FileTailSpout, par=1, config={"files.dir": sys.argv[1],
                                                          "files.positions.dir": sys.argv[2]})
b.add_bolt("count", Progress, par=1, inputs={spout: Grouping.SHUFFLE},
           config={"topology.tick.tuple.freq.secs": 0.1, "bench.progress": sys.argv[3]})
b.set_config({"topology.stmgrs": 1, "topology.reliability.mode": "ATLEAST_ONCE",
              "topology.max.spout.pending": 5000})
b.build_and_submit()
'''


def write_file(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "a.txt"
    payload = "x" * 80
    with open(path, "w") as f:
        for start in range(0, n, 10_000):
            f.write("".join(f"line {i} {payload}\n" for i in range(start, min(n, start + 10_000))))
    return path


def bare(path: Path, n: int) -> float:
    """The bare loop's lines/s: each line read, decoded and made the row the spout emits."""
    t0 = time.perf_counter()
    got = 0
    with open(path, "rb") as f:
        for number, raw in enumerate(f):
            row = [path.name, number, raw.rstrip(b"\n").decode("utf-8")]
            got += row[1] >= 0
    assert got == n, (got, n)
    return n / (time.perf_counter() - t0)


def spout(folder: Path, home: Path, n: int, tag: str, python: str = sys.executable) -> float:
    """The spout's lines/s, its topology submitted by ``python``'s CLI (another interpreter runs
    another checkout: ``--rev``)."""
    f = home / "files_bench_topology.py"
    f.write_text(TOPOLOGY)
    positions, progress = home / f"positions-{tag}", home / f"progress-{tag}.json"
    env = {**os.environ, "HERON_PY_HOME": str(home)}
    env.pop("PYTHONPATH", None)
    cli = [python, "-m", "heron_py.cli.main"]
    # cwd: the interpreter must not import the tree it is started from (another checkout)
    p = subprocess.run([*cli, "submit", "local", str(f), str(folder), str(positions), str(progress)], env=env,
                       cwd=home, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"files bench: submit failed:\n{p.stdout}\n{p.stderr}")
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            time.sleep(0.1)
            try:
                count, first, last = json.loads(progress.read_text())
            except (FileNotFoundError, ValueError):
                continue
            if count >= n:
                return n / (last - first)
        raise SystemExit(f"files bench: the topology counted fewer than {n} lines in 600 s")
    finally:
        subprocess.run([*cli, "kill", "local", "files_bench"], env=env, cwd=home, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=1_000_000)
    add_ab_args(ap)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="files_bench"))
    folder = home / "in"
    path = write_file(folder, args.lines)
    what = f"{args.lines:,} lines of {path.stat().st_size // args.lines} bytes per run"
    if args.rev:
        ab_against_bare(args.rev, args.reps, what, lambda _rep: bare(path, args.lines),
                        lambda side, rep, python: spout(folder, home, args.lines, f"{side}{rep}", python))
        return
    b, s = bare(path, args.lines), spout(folder, home, args.lines, "B")
    print(f"{what}\n| bare read loop (lines/s) | FileTailSpout at least once (lines/s) | ratio |\n|---|---|---|\n"
          f"| {b:,.0f} | {s:,.0f} | {s / b:.2f}x |")


if __name__ == "__main__":
    main()
