"""Memory per pending root in the stream manager's XOR tracker (issue 4), measured.

    python bench/ack_memory.py [--roots 200000]

Inserts N pending roots (random 64-bit ids, 2 spout tasks) and reports the bytes that
tracemalloc sees per root, next to the 24 bytes of payload a root needs (task, root id,
XOR value). Python's dict entry, tuple key and int objects are the overhead.
"""

from __future__ import annotations

import argparse
import random
import tracemalloc

from heron_py.acking.tracker import XorTracker


def _tracker() -> XorTracker:
    """A tracker with the stream manager's three buckets (an engine from before the bucket
    count was a parameter takes none)."""
    try:
        return XorTracker(buckets=3)
    except TypeError:
        return XorTracker()  # type: ignore[call-arg]

def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--roots", type=int, default=200_000)
    args = ap.parse_args()
    rng = random.Random(1)
    keys = [(1 + i % 2, rng.getrandbits(64), rng.getrandbits(64) or 1) for i in range(args.roots)]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    t = _tracker()
    for task, root, value in keys:
        t.update(task, root, value)
    after = tracemalloc.get_traced_memory()[0]
    per_root = (after - before) / args.roots
    print(f"pending roots: {t.pending}; tracker memory {(after - before) / 2**20:.1f} MiB; "
          f"{per_root:.0f} bytes per pending root (payload 24 bytes; the rest is CPython dict/tuple/int overhead)")


if __name__ == "__main__":
    main()
