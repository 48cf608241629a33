"""What the connector benchmarks (kafka_bench.py, rabbitmq_bench.py, redis_bench.py,
files_bench.py) share: the head of the topology file each one submits, a spout feeding
``Count``, a bolt that counts and acks each tuple (the cheapest consumer, so the spout's own cost
shows); and the A/B of a spout at a git revision against this tree beside the bare loop."""

import argparse
import statistics
import sys
from collections.abc import Callable


def topology_head(spout_import: str) -> str:
    """The topology file's imports (``spout_import`` brings the connector's spout) and ``Count``."""
    return f'''
import sys
{spout_import}
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

class Count(Bolt):
    def initialize(self, config, context):
        self.n = 0
    def process(self, tup):
        self.n += 1
        self.ack(tup)
'''


def add_ab_args(ap: argparse.ArgumentParser) -> None:
    """The A/B options every connector benchmark takes (``ab_against_bare`` runs them)."""
    ap.add_argument("--rev", help="A/B: A = the spout at this git revision, B = this tree")
    ap.add_argument("--reps", type=int, default=3)


def ab_against_bare(rev: str, reps: int, what: str, bare: Callable[[int], float],
                    spout: Callable[[str, int, str], float]) -> None:
    """``reps`` reps of a bare loop (``bare(rep)``) and the spout on each side (``spout(side, rep,
    python)``: A the engine at ``rev`` in bench/ab.py's worktree, B this tree), which side goes
    first alternating; prints a row per rep and the medians. ``what`` heads the table."""
    from ab import checkout_python  # type: ignore[import-not-found]

    sides = {"A": checkout_python(rev), "B": sys.executable}
    got: dict[str, list[float]] = {"A": [], "B": []}
    bares: list[float] = []
    print(f"A = {rev}, B = this tree; {what}\n| rep | bare | A | B | B/A |\n|---|---|---|---|---|")
    for rep in range(reps):
        bares.append(bare(rep))
        for side in ("AB" if rep % 2 == 0 else "BA"):  # alternating: neither always runs first
            got[side].append(spout(side, rep, sides[side]))
        print(f"| {rep + 1} | {bares[-1]:,.0f} | {got['A'][-1]:,.0f} | {got['B'][-1]:,.0f} | "
              f"{got['B'][-1] / got['A'][-1]:.3f} |")
    a, b, bb = statistics.median(got["A"]), statistics.median(got["B"]), statistics.median(bares)
    print(f"medians: bare {bb:,.0f}, A {a:,.0f} ({a / bb:.2f}x bare), B {b:,.0f} ({b / bb:.2f}x bare); "
          f"B/A {b / a:.3f}")
