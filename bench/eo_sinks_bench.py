"""What exactly once at the sink costs: examples/effectively_once/files_to_sinks.py (files →
split → PostgresInsertBolt and FileSink, 2 containers) under EFFECTIVELY_ONCE against the same
topology under ATLEAST_ONCE, A/B in one run, on one PostgreSQL 15. The lead runs it:

    .venv/bin/python bench/eo_sinks_bench.py [--lines 100000] [--reps 2]

Each run writes the input files whole first, submits, and is timed from when every task runs
until every word is in the table and in the part files (at least once: its in-progress
file included, its lines fsynced and acked; submit and start not counted): words per second
through both sinks. Under effectively once a word is written only once its
checkpoint completed (1 s interval), so the tail of the run waits for that last checkpoint."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.postgres_server import PostgresServer  # noqa: E402

TOPOLOGY = REPO / "examples" / "effectively_once" / "files_to_sinks.py"


def one(pg: PostgresServer, lines: int, mode: str, rep: int) -> float:
    from heron_py.testing import run_local
    from heron_py.testing.local import kill_local

    work = Path(tempfile.mkdtemp(prefix="eo_sinks_bench"))
    folder, out, home = work / "in", work / "out", work / "home"
    folder.mkdir()
    home.mkdir()
    with open(folder / "a.log", "w") as fa, open(folder / "b.log", "w") as fb:
        for i in range(lines):
            (fa if i % 2 else fb).write(f"w{i % 97} x{i}\n")
    words = 2 * lines
    table = f"words_{mode.lower()}_{rep}"
    pg.execute(f"DROP TABLE IF EXISTS {table}")
    pg.execute(f"CREATE TABLE {table} (file text, lineno int, pos int, word text)")

    def in_table() -> int:
        return int(pg.execute(f"SELECT count(*) FROM {table}")[0][0])

    def in_files() -> int:
        # at least once counts its in-progress file too: its lines are fsynced and acked, only its
        # final name waits for the roll (files.out.rolling.ms); effectively once has none
        return sum(p.read_bytes().count(b"\n") for p in out.glob("*part-*")) if out.exists() else 0

    run = run_local(TOPOLOGY, ["--dir", str(folder), "--pattern", "*.log", "--postgres", pg.url, "--table", table,
                               "--out", str(out), "--mode", mode], home=home, name=f"eosb{rep}", keep_running=True)
    try:
        # from the moment every task runs (run_local returns then) to every word in both sinks:
        # the first output cannot be the start, as effectively once writes a checkpoint's rows at once
        t0 = time.perf_counter()
        while in_table() < words or in_files() < words:
            time.sleep(0.02)
        took = time.perf_counter() - t0
        return words / took
    finally:
        kill_local(home, run.name)
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    pg = PostgresServer()
    try:
        rows = []
        for rep in range(args.reps):
            alo = one(pg, args.lines, "ATLEAST_ONCE", rep)
            eo = one(pg, args.lines, "EFFECTIVELY_ONCE", rep)
            rows.append((alo, eo))
            print(f"rep {rep}: at least once {alo:,.0f} words/s, effectively once {eo:,.0f} words/s, "
                  f"EO/ALO {eo / alo:.2f}x", flush=True)
        print("\n| lines | at least once (words/s) | effectively once (words/s) | EO/ALO |\n|---|---|---|---|")
        for alo, eo in rows:
            print(f"| {args.lines} | {alo:,.0f} | {eo:,.0f} | {eo / alo:.2f}x |")
    finally:
        pg.destroy()


if __name__ == "__main__":
    main()
