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
import sys
import tempfile
import time
from pathlib import Path

from ab import checkout_python  # type: ignore[import-not-found]
from multilang_parts import total_words
from run import _kill, _submit  # type: ignore[import-not-found]

VARIANTS = ["native", "pystorm-native", "storm.py-json", "storm.py-json-nowake", "pystorm-json", "pystorm-msgpack"]


def run_once(variant: str, n: int, home: Path, python: str = sys.executable) -> float:
    out = Path(tempfile.mkdtemp(prefix=f"ml-{variant}-", dir=home))
    env, _ = _submit(home, "multilang_topology.py", [variant, str(n), str(out)], python=python)
    try:
        deadline = time.monotonic() + 600
        while not (out / "end").exists():
            if time.monotonic() > deadline:
                raise SystemExit(f"bench: {variant} did not count every word within 600 s")
            time.sleep(0.1)
        start, end = float((out / "start").read_text()), float((out / "end").read_text())
    finally:
        _kill(env, "bench_ml", python)
    return total_words(n) / (end - start)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=40000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset")
    ap.add_argument("--rev", help="also run each variant with the engine at this git revision (A/B in one run)")
    args = ap.parse_args()
    runs: list[tuple[str, str, str]] = []  # (label, variant, interpreter)
    old = checkout_python(args.rev) if args.rev else None
    for v in args.variants.split(","):
        if old is not None:
            runs.append((f"{v}@{args.rev}", v, old))
        runs.append((v, v, sys.executable))
    rates: dict[str, list[float]] = {label: [] for label, _, _ in runs}
    with tempfile.TemporaryDirectory(prefix="heron-ml-bench-") as tmp:
        for _ in range(args.reps):
            for label, v, py in runs:
                rates[label].append(run_once(v, args.sentences, Path(tmp), py))
    base_label = "native" if "native" in rates else runs[0][0]
    base = statistics.median(rates[base_label])
    print(f"{args.sentences} sentences ({total_words(args.sentences)} words), {args.reps} reps, alternating")
    print(f"{'variant':28} {'words/s (median)':>17} {'vs ' + base_label:>12}  reps")
    for label in rates:
        m = statistics.median(rates[label])
        print(f"{label:28} {m:17,.0f} {m / base:12.3f}  {', '.join(f'{r:,.0f}' for r in rates[label])}")


if __name__ == "__main__":
    main()
