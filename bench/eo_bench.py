"""Effectively once's cost, in one run: the stateful word count (bench/eo_topology.py, 2
containers) in ATMOST_ONCE and in EFFECTIVELY_ONCE with a checkpoint every 1 s and every 10 s,
alternating, as words/s and as a ratio to ATMOST_ONCE; with the checkpoints' duration (from the
master's start to every task's save) and size, from the master's log.

    python bench/eo_bench.py [--sentences N] [--reps 3]
    python bench/eo_bench.py --rev 3c2b929 [--reps 3]   # A = EO 1s at REV, B = EO 1s of this tree

With ``--rev`` (bench/ab.py's worktree and interpreter for the revision) the rows are
ATMOST_ONCE and EFFECTIVELY_ONCE with 1 s checkpoints of this tree, and EFFECTIVELY_ONCE with
1 s checkpoints at REV, alternating: the cost of the changes between REV and this tree on a
checkpointed run, as B/A of the two EO rows.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ab import checkout_python  # type: ignore[import-not-found]
from run import _kill, _submit  # type: ignore[import-not-found]

VARIANTS = {"ATMOST_ONCE": ("ATMOST_ONCE", "1"), "EO 1s": ("EFFECTIVELY_ONCE", "1"),
            "EO 10s": ("EFFECTIVELY_ONCE", "10")}


def _counted(out: Path) -> tuple[float, int]:
    """(time, words) at which the count tasks' summed totals were last seen growing."""
    last: dict[str, tuple[float, int]] = {}
    for f in out.glob("count-*"):
        lines = f.read_text().split("\n")
        rows = [ln.split() for ln in lines if ln.count(" ") == 1]
        if rows:
            w = rows[-1][1]
            # the first time this task reached its final total
            first = next(float(r[0]) for r in rows if int(r[1]) == int(w))
            last[f.name] = (first, int(w))
    if not last:
        return 0.0, 0
    return max(t for t, _ in last.values()), sum(w for _, w in last.values())


def run_once(label: str, n: int, home: Path, python: str = sys.executable) -> tuple[float, list[tuple[int, float]]]:
    mode, interval = VARIANTS[label.split(" @")[0]]
    out = Path(tempfile.mkdtemp(prefix="eo-", dir=home))
    env, _ = _submit(home, "eo_topology.py", [mode, interval, str(n), str(out)], python=python)
    want = 10 * n
    try:
        deadline = time.monotonic() + 900
        while _counted(out)[1] < want:
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: {label} did not count every word within 900 s")
            time.sleep(0.2)
        time.sleep(0.2)
        end, words = _counted(out)
        if words != want:
            raise SystemExit(f"bench: {label} counted {words} words, expected {want}")
        start = float((out / "start").read_text())
        log = (home / "topologies" / "bench_eo" / "logs" / "container-0" / "tmanager.log").read_text()
        ckpts = [(int(b), float(ms)) for b, ms in re.findall(r"checkpoint \d+ complete: \d+ tasks, (\d+) bytes, "
                                                             r"([\d.]+) ms", log)]
    finally:
        _kill(env, "bench_eo", python)
    return want / (end - start), ckpts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rev", help="A: EFFECTIVELY_ONCE (1 s) with the engine at this git revision")
    args = ap.parse_args()
    # label -> interpreter: this tree's, or the revision's (bench/ab.py)
    runs = {label: sys.executable for label in VARIANTS}
    if args.rev:
        runs = {"ATMOST_ONCE": sys.executable, f"EO 1s @{args.rev}": checkout_python(args.rev),
                "EO 1s": sys.executable}
    rates: dict[str, list[float]] = {label: [] for label in runs}
    ckpts: dict[str, list[tuple[int, float]]] = {label: [] for label in runs}
    with tempfile.TemporaryDirectory(prefix="heron-eo-bench-") as tmp:
        for _ in range(args.reps):
            for label, python in runs.items():
                rate, done = run_once(label, args.sentences, Path(tmp), python)
                rates[label].append(rate)
                ckpts[label] += done
    load = os.getloadavg()
    base = statistics.median(rates["ATMOST_ONCE"])
    print(f"{args.sentences} sentences ({10 * args.sentences} words), {args.reps} reps alternating, "
          f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'mode':14} {'words/s (median)':>17} {'vs ATMOST':>10} {'checkpoints':>12} {'ms (median)':>12} "
          f"{'bytes':>8}  reps")
    for label, rs in rates.items():
        m = statistics.median(rs)
        cs = ckpts[label]
        ms = f"{statistics.median(c[1] for c in cs):.1f}" if cs else "-"
        size = str(cs[-1][0]) if cs else "-"
        print(f"{label:14} {m:17,.0f} {m / base:10.3f} {len(cs):12} {ms:>12} {size:>8}  "
              f"{', '.join(f'{r:,.0f}' for r in rs)}")
    if args.rev:
        a, b = statistics.median(rates[f"EO 1s @{args.rev}"]), statistics.median(rates["EO 1s"])
        print(f"EFFECTIVELY_ONCE 1 s, this tree / {args.rev}: {b / a:.3f}")


if __name__ == "__main__":
    main()
