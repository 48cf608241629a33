# Copied unchanged from the shared benchmark workload (../shared/bench/peers/wc_common.py)
# so the examples and benchmarks run on a fresh clone; tests check it has not drifted.
"""Shared word-count workload for the peer benchmarks.

Workload (identical for every system):
  * VOCAB: 1,000 distinct pseudo-words (3..9 lowercase letters) from random.Random(7).
  * POOL: POOL_SIZE = 100,003 sentences, each 10 words drawn with
    random.Random(42).choices(VOCAB, k=10), joined by single spaces.
  * sentence(i) = POOL[i % POOL_SIZE] for i in [0, N). Index-addressable, so
    parallel sources (Spark rate source, Flink sequence source, Beam shards,
    bytewax partitions) produce exactly the same multiset of sentences as a
    sequential loop, and generation costs one list lookup per sentence (so the
    benchmark measures the framework + split/count, not the RNG).
  * Work: split each sentence on whitespace, count occurrences per word
    (keyed aggregation). Result: 1,000 (word, count) pairs summing to 10*N.
  * checksum(counts): first 16 hex chars of sha256 over sorted "word count\\n" lines.

Every bench_<system>.py prints one JSON line (prefixed RESULT ) with t_run
(seconds for the pipeline, excluding interpreter start, imports and, where it
can be separated, JVM/session start), t_setup (process start -> pipeline
start), words/sec, checksum and ok (= counts equal to the analytic expectation).
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
from collections import Counter


def _process_start_time() -> float:
    """Wall-clock time at which this process was created (10 ms resolution)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
        return time.time() - age
    except Exception:  # pragma: no cover - non-Linux
        return time.time()


T_PROCESS_START = _process_start_time()

WORDS_PER_SENTENCE = 10
VOCAB_SIZE = 1000
POOL_SIZE = 100_003


def _make_vocab():
    rng = random.Random(7)
    letters = "abcdefghijklmnopqrstuvwxyz"
    seen = set()
    out = []
    while len(out) < VOCAB_SIZE:
        w = "".join(rng.choice(letters) for _ in range(rng.randint(3, 9)))
        if w not in seen:
            seen.add(w)
            out.append(w)
    return out


VOCAB = _make_vocab()
_rng = random.Random(42)
POOL = [" ".join(_rng.choices(VOCAB, k=WORDS_PER_SENTENCE)) for _ in range(POOL_SIZE)]
del _rng


now = time.time  # all scripts time with this (wall clock, comparable with T_PROCESS_START)


def sentence(i: int) -> str:
    return POOL[i % POOL_SIZE]


def sentences(start: int, stop: int):
    """Yield sentence(i) for i in [start, stop)."""
    pool = POOL
    p = POOL_SIZE
    for i in range(start, stop):
        yield pool[i % p]


def expected_counts(n: int) -> dict:
    full, rem = divmod(n, POOL_SIZE)
    c_all = Counter()
    for s in POOL:
        c_all.update(s.split())
    c = Counter({w: k * full for w, k in c_all.items()}) if full else Counter()
    for s in POOL[:rem]:
        c.update(s.split())
    return dict(c)


def checksum(counts: dict) -> str:
    h = hashlib.sha256()
    for w in sorted(counts):
        h.update(f"{w} {counts[w]}\n".encode())
    return h.hexdigest()[:16]


def base_args(description: str):
    import argparse

    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--sentences", "-n", type=int, default=1_000_000)
    return ap


def report(system: str, version: str, n: int, t_run_start: float, t_run_end: float,
           counts: dict, **extra) -> dict:
    counts = {str(k): int(v) for k, v in counts.items()}
    exp = expected_counts(n)
    t_run = t_run_end - t_run_start
    words = n * WORDS_PER_SENTENCE
    res = {
        "system": system,
        "version": version,
        "sentences": n,
        "words": words,
        "t_run": round(t_run, 4),
        "t_setup": round(t_run_start - T_PROCESS_START, 4),
        "words_per_s": round(words / t_run, 1) if t_run > 0 else None,
        "checksum": checksum(counts),
        "expected_checksum": checksum(exp),
        "ok": counts == exp,
        "pid": os.getpid(),
    }
    res.update(extra)
    print("RESULT " + json.dumps(res), flush=True)
    if not res["ok"]:
        print(f"COUNT MISMATCH: got {sum(counts.values())} words over {len(counts)} keys",
              file=sys.stderr)
    return res
