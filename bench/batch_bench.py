"""`heron-py batch` word count against the shared PySpark RDD peer
(../shared/bench/peers/bench_spark.py --mode rdd), on the same sentences, in one run.

    python bench/batch_bench.py [--sentences 1000000]
    python bench/batch_bench.py --rev REV [--rev REV2] [--reps 3]   # A/B: ours at REV (and REV2)
                                                                   # against this tree, and the peer

Both use local[2] and report t_run without the JVM and SparkSession start: ours is the time
the CLI reports for the batch run itself (stages, output written as Parquet); the peer's is
its own t_run. Also runs each at a small N, so the marginal rate (extra words / extra
seconds) removes fixed costs such as Python worker start.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT.parent / "shared" / "bench" / "peers"
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import wc_common  # noqa: E402


def ours(n: int, work: Path, python: str = sys.executable) -> float:
    text = work / f"sentences-{n}.txt"
    with text.open("w") as f:
        for i in range(n):
            f.write(wc_common.sentence(i) + "\n")
    out = work / f"counts-{n}"
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", HERON_PY_HOME=str(work))
    # cwd: not this checkout, whose heron_py would shadow the one an A side's interpreter runs
    p = subprocess.run([python, "-m", "heron_py.cli.main", "batch", "--input", f"sentence={text}",
                        "--output", f"count={out}", str(ROOT / "examples" / "word_count.py")],
                       env=env, capture_output=True, text=True, cwd=work)
    m = re.search(r"took ([0-9.]+) s", p.stdout)
    if p.returncode != 0 or m is None:
        raise SystemExit(f"batch run failed:\n{p.stdout}\n{p.stderr[-3000:]}")
    import pyarrow.parquet as pq

    counts = {r["word"]: r["count"] for r in pq.read_table(out).to_pylist()}
    if counts != wc_common.expected_counts(n):
        raise SystemExit("batch run: WRONG counts")
    return float(m.group(1))


def peer(n: int) -> float:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable)
    p = subprocess.run([sys.executable, str(PEERS / "bench_spark.py"), "--mode", "rdd", "--sentences", str(n)],
                       cwd=str(PEERS), env=env, capture_output=True, text=True)
    res = next((json.loads(line[7:]) for line in p.stdout.splitlines() if line.startswith("RESULT ")), None)
    if res is None:
        raise SystemExit(f"peer failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return float(res["t_run"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=1_000_000)
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--rev", action="append", default=[],
                    help="A/B: A = `heron-py batch` at this git revision (repeatable), B = this tree, alternating")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="heron-batch-bench-"))
    if args.rev:
        rev_ab(args, work)
        return
    rows = []
    for name, fn in (("heron-py batch (word_count.py, local[2])", lambda k: ours(k, work)),
                     ("PySpark RDD peer (local[2])", peer)):
        t_big, t_small = fn(args.sentences), fn(args.small)
        wps = 10 * args.sentences / t_big
        marginal = 10 * (args.sentences - args.small) / max(1e-9, t_big - t_small)
        rows.append((name, wps, t_big, t_small, marginal))
    base = rows[1][1]
    print(f"\nword count on PySpark, {args.sentences:,} sentences; fixed-cost twin at {args.small:,}\n")
    print("| system | words/s | x peer | t_run s | t_run small s | marginal words/s |")
    print("|---|---|---|---|---|---|")
    for name, wps, tb, ts, marg in rows:
        print(f"| {name} | {wps:,.0f} | {wps / base:.2f} | {tb:.1f} | {ts:.1f} | {marg:,.0f} |")


def rev_ab(args: argparse.Namespace, work: Path) -> None:
    """A = ours at each --rev, B = this tree, and the peer, alternating; medians and ratios."""
    from ab import checkout_python  # type: ignore[import-not-found]

    sides = {f"A {rev}": checkout_python(rev) for rev in args.rev}
    sides["B this tree"] = sys.executable
    times: dict[str, list[float]] = {k: [] for k in [*sides, "PySpark RDD peer"]}
    for _ in range(args.reps):
        for name, py in sides.items():
            times[name].append(ours(args.sentences, work, py))
            print(f"{name}: {times[name][-1]:.2f} s", flush=True)
        times["PySpark RDD peer"].append(peer(args.sentences))
        print(f"PySpark RDD peer: {times['PySpark RDD peer'][-1]:.2f} s", flush=True)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    for name, ts in times.items():
        runs = ", ".join(f"{t:.2f}" for t in ts)
        print(f"{name}: median {med[name]:.2f} s = {10 * args.sentences / med[name]:,.0f} words/s, "
              f"{med['PySpark RDD peer'] / med[name]:.2f}x the peer (runs: {runs})")
    for rev in args.rev:
        print(f"B/A {rev} (speed) = {med[f'A {rev}'] / med['B this tree']:.3f}")


if __name__ == "__main__":
    main()
