"""What the word count's own user code costs, with no engine at all: the ceiling of any
engine that runs bench/wc_topology.py's bolts as written (one Python ``emit`` call per word in
the split bolt, one ``process`` call per word in the count bolt).

    python bench/ceiling.py [--sentences 200000]

In one process, on the shared sentences: the plain loop (split + Counter); the split bolt's
``process`` with an ``emit`` that only appends (heronpy's signature); the count bolt's
``process`` on tuples built as the runtime builds them. The sum of the two bolts' costs per
word, spread perfectly over the machine's cores, bounds the words/s any engine can reach with
this user code; printed as a ratio of the plain loop, as bench/run.py reports. The same again
with acking on, as the bolts are written for it (each word emitted with ``anchors=[tup]``, each
input acked), the ``ack`` a call that does nothing: the ceiling of at least once with this user
code, before the engine tracks a single id.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import wc_common  # noqa: E402
from wc_topology import BenchCount, BenchSplit  # noqa: E402

from heron_py.api.tuple import HeronTuple  # noqa: E402


class _Sink:
    """Stands in for the delegate: the bolts get ``emit`` rebound below."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=200_000)
    a = ap.parse_args()
    n = a.sentences
    sentences = [wc_common.sentence(i) for i in range(n)]
    words = 10 * n

    t0 = time.perf_counter()
    # the shared baseline's loop (../shared/bench/peers/bench_plain.py: a defaultdict count; a
    # Counter is 1.65x slower), over the same sentences made beforehand
    d: defaultdict[str, int] = defaultdict(int)
    for s in sentences:
        for w in s.split():
            d[w] += 1
    plain = time.perf_counter() - t0

    out: list[Any] = []
    append = out.append

    def emit(values: Any, stream: str = "default", anchors: Any = None, direct_task: Any = None,
             need_task_ids: bool = False) -> None:
        append(values)

    cores = os.cpu_count() or 1
    plain_wps = words / plain
    print(f"{n:,} sentences ({words:,} words), {cores} cores")
    print(f"plain loop:                      {plain / words * 1e6:.3f} us/word ({plain_wps:,.0f} words/s)")
    for acking in (False, True):
        t_split, t_count = _bolts(sentences, emit, out, acking)
        per_word = (t_split + t_count) / words
        ceiling = cores / per_word
        mode = "acking on, ack a no-op" if acking else "acking off"
        print(f"{mode}:")
        print(f"  split bolt process + emit call: {t_split / words * 1e6:.3f} us/word")
        print(f"  count bolt process:             {t_count / words * 1e6:.3f} us/word")
        print(f"  user code per word:             {per_word * 1e6:.3f} us -> at most {ceiling:,.0f} words/s on "
              f"{cores} cores = {ceiling / plain_wps:.3f}x plain, before any engine work")


def _bolts(sentences: list[str], emit: Any, out: list[Any], acking: bool) -> tuple[float, float]:
    """Seconds of the split bolt's and of the count bolt's ``process`` over every sentence's
    tuple and every word's, acking as the benchmark's bolts do when the topology acks."""
    def ack(tup: Any) -> None:
        pass

    out.clear()
    split = BenchSplit(_Sink())
    split.acking = acking
    split.emit = emit  # type: ignore[method-assign]
    split.ack = ack  # type: ignore[method-assign]
    new = tuple.__new__
    tuples = [new(HeronTuple, (None, "sentence", "default", 1, [s], 0.0, None)) for s in sentences]
    t0 = time.perf_counter()
    process = split.process
    for t in tuples:
        process(t)
    t_split = time.perf_counter() - t0

    count = BenchCount(_Sink())
    count.counts, count.total, count.last, count.acking = Counter(), 0, 0.0, acking
    count.ack = ack  # type: ignore[method-assign]
    word_tuples = [new(HeronTuple, (None, "split", "default", 2, v, 0.0, None)) for v in out]
    t0 = time.perf_counter()
    process = count.process
    for t in word_tuples:
        process(t)
    t_count = time.perf_counter() - t0
    return t_split, t_count


if __name__ == "__main__":
    main()
