"""A/B of one engine switch in one run: our word count (acking off) with a topology config
property set to A and to B, alternating, next to the plain loop; prints each ratio. With
``--latency RATE`` it compares end-to-end latency at RATE sentences/s instead.

    python bench/ab.py heron_py.instance.specialized.emit false true [--reps 2] [--sentences N]
    python bench/ab.py heron_py.instance.flush.when.idle false true --latency 10000
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from run import latency, ours, plain  # type: ignore[import-not-found]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("key")
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--sentences", type=int, default=300_000)
    ap.add_argument("--acking", action="store_true")
    ap.add_argument("--latency", type=float, default=0.0, metavar="RATE")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="heron-ab-"))
    if args.latency:
        for rep in range(args.reps):
            for v in (args.a, args.b):
                r = latency(args.latency, args.acking, home, 5, 15, 0, {args.key: v})["e2e"]
                print(f"rep {rep} {args.key}={v}: p50 {r['p50_ms']:.2f} ms, p90 {r['p90_ms']:.2f} ms, "
                      f"p99 {r['p99_ms']:.2f} ms, max {r['max_ms']:.1f} ms", flush=True)
        return
    res: dict[str, list[float]] = {args.a: [], args.b: []}
    bases = []
    for _ in range(args.reps):
        bases.append(plain(args.sentences)["words_per_s"])
        for v in (args.a, args.b):
            res[v].append(ours(args.sentences, args.acking, home, {args.key: v})["words_per_s"])
    base = statistics.median(bases)
    print(f"\nplain loop {base:,.0f} words/s (median of {args.reps})")
    for v, xs in res.items():
        m = statistics.median(xs)
        print(f"{args.key}={v}: {m:,.0f} words/s = {m / base:.3f}x plain  (runs: {', '.join(f'{x:,.0f}' for x in xs)})")
    ma, mb = statistics.median(res[args.a]), statistics.median(res[args.b])
    print(f"B/A = {mb / ma:.3f}")


if __name__ == "__main__":
    main()
