"""One command, one run: our word count on the local scheduler (2 containers, split par 2,
count par 2, fields grouping) with acking off and on, next to the plain-loop baseline, on the
shared workload (examples/wc_common.py = ../shared/bench/peers/wc_common.py). Prints a table
with words/s, the ratio to the plain loop measured in this run, and peak RSS/PSS of all the
topology's processes.

    python bench/run.py [--sentences 300000]

Not yet here (issue 9): the latency runs and the bytewax/PySpark peers side by side.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))

import wc_common  # noqa: E402

from heron_py.scheduler.local import LocalScheduler  # noqa: E402
from heron_py.state import LocalFsStateManager  # noqa: E402


def plain(n: int) -> float:
    t0 = time.perf_counter()
    d: Counter[str] = Counter()
    for s in wc_common.sentences(0, n):
        for w in s.split():
            d[w] += 1
    t = time.perf_counter() - t0
    assert dict(d) == wc_common.expected_counts(n)
    return 10 * n / t


def ours(n: int, acking: bool, home: Path) -> dict[str, float]:
    out = Path(tempfile.mkdtemp(prefix="bench-", dir=home))
    # wc_common lives in examples/: on the submitter's PYTHONPATH, it ships in the package
    env = dict(os.environ, HERON_PY_HOME=str(home), PYTHONPATH=str(ROOT / "examples"))
    cli = [sys.executable, "-m", "heron_py.cli.main"]
    subprocess.run([*cli, "submit", "local", str(ROOT / "bench" / "wc_topology.py"), str(n), str(out),
                    "on" if acking else "off"], env=env, check=True, capture_output=True)
    state = LocalFsStateManager(home)
    tid = str((state.get_scheduler_location("bench_wc") or {})["topology_id"])
    peak_rss = peak_pss = 0.0
    total = 0
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            time.sleep(0.2)
            rss = pss = 0
            for p in LocalScheduler.topology_processes(tid):
                try:
                    m = p.memory_full_info()
                    rss += m.rss
                    pss += m.pss
                except psutil.Error:
                    pass
            peak_rss, peak_pss = max(peak_rss, rss / 2**20), max(peak_pss, pss / 2**20)
            counts = [f.read_text().split() for f in out.glob("count-*") if not f.name.endswith(".tmp")]
            total = sum(int(c[0]) for c in counts)
            if total >= 10 * n:
                break
        start = min(float(f.read_text()) for f in out.glob("spout-*"))
        end = max(float(c[1]) for c in counts)
    finally:
        subprocess.run([*cli, "kill", "local", "bench_wc"], env=env, capture_output=True)
    if total != 10 * n:
        raise SystemExit(f"bench: counted {total} words, expected {10 * n}")
    return {"words_per_s": 10 * n / (end - start), "t_run": end - start, "rss": peak_rss, "pss": peak_pss}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=300_000)
    args = ap.parse_args()
    n = args.sentences
    home = Path(tempfile.mkdtemp(prefix="heron-bench-"))
    base = plain(n)
    rows = [("plain loop (baseline, this run)", base, None)]
    for acking in (False, True):
        r = ours(n, acking, home)
        rows.append((f"heron-py word count, acking {'on' if acking else 'off'}", r["words_per_s"], r))
    print(f"\nword count, {n} sentences ({10 * n} words), {os.cpu_count()} cores\n")
    print("| system | words/s | x plain | t_run s | peak RSS / PSS MB |")
    print("|---|---|---|---|---|")
    for name, wps, r in rows:
        mem = f"{r['rss']:.0f} / {r['pss']:.0f}" if r else "-"
        t = f"{r['t_run']:.2f}" if r else f"{10 * n / wps:.2f}"
        print(f"| {name} | {wps:,.0f} | {wps / base:.3f} | {t} | {mem} |")


if __name__ == "__main__":
    main()
