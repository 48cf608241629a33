"""Memory per pending root in the stream manager's XOR tracker (issue 4), measured.

    python bench/ack_memory.py [--roots 200000]

Inserts N pending roots (random 64-bit ids, 2 spout tasks) and reports the bytes per root the
process's resident set grew by (the compiled root tables, heron_py/acking/roots.pyx, hold the
roots in memory of their own, which tracemalloc does not see), next to the 24 bytes of payload a
root needs (task, root id, XOR value).
"""

from __future__ import annotations

import argparse
import random

import psutil
from ack_cost import stream_manager_tracker  # type: ignore[import-not-found]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--roots", type=int, default=200_000)
    args = ap.parse_args()
    rng = random.Random(1)
    keys = [(1 + i % 2, rng.getrandbits(64), rng.getrandbits(64) or 1) for i in range(args.roots)]
    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    t = stream_manager_tracker()
    for task, root, value in keys:
        t.update(task, root, value)
    rss1 = proc.memory_info().rss
    print(f"pending roots: {t.pending}; resident set +{(rss1 - rss0) / 2**20:.1f} MiB, "
          f"{(rss1 - rss0) / args.roots:.0f} bytes per pending root (payload 24 bytes)")


if __name__ == "__main__":
    main()
