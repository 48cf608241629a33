"""The pause a rescale causes: the longest time without output while ``heron-py update``
resizes one component of a running word count on the local scheduler.

    python bench/rescale_pause.py [--containers 4] [--rate 300] [--steps count:3,count:2,count:3]
                                  [--mode paced|alo|eo] [--settle 6]

``paced`` is examples/paced_word_count.py at most once (its spout resumes at the sentence due
now after a restart); ``alo`` is examples/reliable_word_count.py at least once (acked, replayed
on failure); both are rescaled live (only the added and removed tasks start and stop); ``eo``
is examples/stateful_word_count.py under effectively once (a checkpoint a second; a rescale
is live too, and at the switch every task restores the newest checkpoint in its process, count's
state split by key group, the spouts replaying from their checkpointed positions). Output is
what the count tasks receive (the run's capture files): a poller notes every moment they grew,
and a step's pause is the longest interval without growth from just before its ``update`` until
``--settle`` seconds after it returned. Prints one JSON line per step and a table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples"))

from heron_py.testing import run_local  # noqa: E402
from heron_py.testing.local import kill_local  # noqa: E402


class Growth:
    """Polls the total size of the capture files; keeps the times they grew."""

    def __init__(self, folder: Path, every_s: float = 0.005) -> None:
        self.folder = folder
        self.every_s = every_s
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _size(self) -> int:
        total = 0
        for f in self.folder.rglob("*.jsonl"):
            try:
                total += f.stat().st_size
            except FileNotFoundError:
                pass
        return total

    def _run(self) -> None:
        last = -1
        while not self._stop.is_set():
            size = self._size()
            if size > last:
                self.times.append(time.monotonic())
                last = size
            time.sleep(self.every_s)


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest interval in [start, end] without a growth (pure)."""
    inside = [start] + [t for t in times if start < t < end] + [end]
    return max(b - a for a, b in itertools.pairwise(inside))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--containers", type=int, default=4)
    ap.add_argument("--rate", type=float, default=300.0, help="sentences per second (per spout task for eo)")
    ap.add_argument("--steps", default="count:3,count:2,count:3")
    ap.add_argument("--mode", choices=("paced", "alo", "eo"), default="paced")
    ap.add_argument("--settle", type=float, default=6.0)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="heron-rescale-"))
    os.environ["HERON_PY_HOME"] = str(home)
    if args.mode == "paced":
        topo, topo_args = ROOT / "examples" / "paced_word_count.py", ["--rate", str(args.rate)]
    elif args.mode == "alo":
        topo = ROOT / "examples" / "reliable_word_count.py"
        topo_args = ["--sentences", "10000000", "--rate", str(args.rate)]
    else:
        topo = ROOT / "examples" / "stateful_word_count.py"
        topo_args = ["--sentences", "10000000", "--interval", "1", "--rate", str(args.rate)]
    name = f"pause_{args.mode}"
    run_local(topo, [*topo_args, "--containers", str(args.containers)], home=home, name=name, capture=["count"],
              keep_running=True, until=lambda r: len(r["count"]) > 500, timeout=120)
    growth = Growth(home / "capture" / name)
    growth.start()
    rows = []
    try:
        time.sleep(3.0)
        for step in args.steps.split(","):
            t0 = time.monotonic()
            p = subprocess.run([sys.executable, "-m", "heron_py.cli.main", "update", "local", name,
                                "--component-parallelism", step], capture_output=True, text=True, timeout=180)
            t1 = time.monotonic()
            if p.returncode != 0:
                print(p.stderr, file=sys.stderr)
                return 1
            time.sleep(args.settle)
            row = {"mode": args.mode, "containers": args.containers, "step": step, "update_s": round(t1 - t0, 3),
                   "pause_s": round(longest_gap(growth.times, t0 - 0.5, t1 + args.settle), 3)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        growth.stop()
        kill_local(home, name)
    print("\n| mode | containers | step | update s | longest time without output s |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['mode']} | {r['containers']} | {r['step']} | {r['update_s']} | {r['pause_s']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
