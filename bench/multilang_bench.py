"""Multilang overhead, in one run: the same split bolt (sentence -> words) as a native heronpy
bolt, a pystorm bolt run natively in the instance, and multilang subprocesses (Storm's own
storm.py with JSON; pystorm with JSON and with msgpack framing), each a real topology on the
local scheduler (sentences -> split -> count), alternating, as words/s and as a ratio to the
native bolt.

    python bench/multilang_bench.py [--sentences N] [--reps 3]

Storm publishes no figure of its own for multilang overhead; the nearest published anchor is
protoshell's README (a binary multilang serializer for Storm): "three to five times higher
throughput" than Storm's JSON multilang, i.e. JSON multilang at 0.2-0.33x of a binary one.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from multilang_parts import total_words
from run import _kill, _submit  # type: ignore[import-not-found]

VARIANTS = ["native", "pystorm-native", "storm.py-json", "storm.py-json-nowake", "pystorm-json", "pystorm-msgpack"]


def run_once(variant: str, n: int, home: Path) -> float:
    out = Path(tempfile.mkdtemp(prefix=f"ml-{variant}-", dir=home))
    env, _ = _submit(home, "multilang_topology.py", [variant, str(n), str(out)])
    try:
        deadline = time.monotonic() + 600
        while not (out / "end").exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: {variant} did not count every word within 600 s")
            time.sleep(0.1)
        start, end = float((out / "start").read_text()), float((out / "end").read_text())
    finally:
        _kill(env, "bench_ml")
    return total_words(n) / (end - start)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=40000)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    rates: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="heron-ml-bench-") as tmp:
        for _ in range(args.reps):
            for v in VARIANTS:
                rates[v].append(run_once(v, args.sentences, Path(tmp)))
    base = statistics.median(rates["native"])
    print(f"{args.sentences} sentences ({total_words(args.sentences)} words), {args.reps} reps, alternating")
    print(f"{'variant':16} {'words/s (median)':>17} {'vs native':>10}  reps")
    for v in VARIANTS:
        m = statistics.median(rates[v])
        print(f"{v:16} {m:17,.0f} {m / base:10.3f}  {', '.join(f'{r:,.0f}' for r in rates[v])}")


if __name__ == "__main__":
    main()
