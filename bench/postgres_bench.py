"""The PostgresInsertBolt's rows/s against a bare psycopg loop, on the same PostgreSQL 15 and the
same table (issue 38 asks for each source against its bare client; PostgreSQL has a sink only, so
this is the sink's figure, same goal: >= 0.7x). The lead runs it:

    .venv/bin/python bench/postgres_bench.py [--rows 100000]

The bare loop inserts the rows with executemany in transactions of 100 (the bolt's default
batch); the topology is a spout emitting the same rows as fast as the engine takes them
(ATLEAST_ONCE, max spout pending 5000) -> PostgresInsertBolt (par 1, batches of 100, ack after
each COMMIT) on the local scheduler, timed from the first row in the table until all are there
(submit and start are not counted)."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.postgres_server import PostgresServer  # noqa: E402

TABLE = "CREATE TABLE {} (id bigint PRIMARY KEY, word text NOT NULL, n int NOT NULL)"

TOPOLOGY = '''
import sys
from heron_py.connectors.postgres import PostgresInsertBolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder

N = int(sys.argv[2])

class Rows(Spout):
    outputs = ["id", "word", "n"]
    def initialize(self, config, context):
        self.i = 0
    def next_tuple(self):
        if self.i < N:
            self.emit([self.i, f"word{self.i % 1000}", self.i % 97], tup_id=self.i)
            self.i += 1
    def fail(self, tup_id):
        raise RuntimeError(f"row {tup_id} failed: the benchmark expects none")

b = TopologyBuilder("postgres_bench")
rows = b.add_spout("rows", Rows, par=1)
b.add_bolt("insert", PostgresInsertBolt, par=1, inputs={rows: Grouping.SHUFFLE}, config={
    "postgres.url": sys.argv[1], "postgres.table": "bench_bolt", "postgres.batch.size": 100})
b.set_config({"topology.stmgrs": 1, "topology.reliability.mode": "ATLEAST_ONCE",
              "topology.max.spout.pending": 5000})
b.build_and_submit()
'''


def bare(pg: PostgresServer, n: int) -> float:
    import psycopg

    pg.execute(TABLE.format("bench_bare"))
    rows = [(i, f"word{i % 1000}", i % 97) for i in range(n)]
    with psycopg.connect(pg.url) as c:
        t0 = time.perf_counter()
        for start in range(0, n, 100):
            with c.transaction():
                c.cursor().executemany("INSERT INTO bench_bare (id, word, n) VALUES (%s, %s, %s)",
                                       rows[start:start + 100])
        return n / (time.perf_counter() - t0)


def bolt(pg: PostgresServer, home: Path, n: int) -> float:
    from heron_py.testing import run_local
    from heron_py.testing.local import kill_local

    pg.execute(TABLE.format("bench_bolt"))

    def count() -> int:
        return int(pg.execute("SELECT count(*) FROM bench_bolt")[0][0])

    f = home / "postgres_bench_topology.py"
    f.write_text(TOPOLOGY)
    run = run_local(f, [pg.url, str(n)], home=home, name="postgres_bench", keep_running=True)
    try:
        while (c0 := count()) == 0:
            time.sleep(0.005)
        t0 = time.perf_counter()
        if c0 >= n:
            raise SystemExit(f"all {n} rows were written before the first count: use more --rows")
        while count() < n:
            time.sleep(0.01)
        return (n - c0) / (time.perf_counter() - t0)
    finally:
        kill_local(home, run.name)


def main() -> None:
    import tempfile

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="postgres_bench"))
    pg = PostgresServer()
    try:
        b = bare(pg, args.rows)
        s = bolt(pg, home, args.rows)
        print(f"| rows | bare psycopg executemany, 100 a transaction (rows/s) | PostgresInsertBolt at least once "
              f"(rows/s) | ratio |\n|---|---|---|---|\n| {args.rows} | {b:,.0f} | {s:,.0f} | {s / b:.2f}x |")
    finally:
        pg.destroy()


if __name__ == "__main__":
    main()
