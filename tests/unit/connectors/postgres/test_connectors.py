"""The PostgreSQL connectors driven call by call against a real PostgreSQL 15 (no topology): the
insert bolt's batches (ack after commit), upserts, SimpleJdbcMapper from the table's columns, a
refused row isolated row by row and logged once; the lookup bolt's query per input; the query
timeout; every error line verbatim (options, server unreachable with backoff and metrics, wrong
credentials, unknown table). The component host is the RabbitMQ tests' harness; the server is
real."""

from __future__ import annotations

from typing import Any

import pytest

from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.postgres import Column, PostgresInsertBolt, PostgresLookupBolt, SimpleJdbcMapper
from heron_py.connectors.postgres.bolts import insert_sql
from heron_py.connectors.postgres.config import insert_config, lookup_config
from tests.connector_support import Clock, Context, Delegate, make, tup
from tests.foreign import Foreign, Ours
from tests.postgres_server import free_port, postgres_or_skip

W = "postgres insert bolt 'p'"


@pytest.mark.parametrize("conf, line", [
    ({}, f"{W}: config postgres.table / postgres.insert.query: expected exactly one of them, found "
         f"{{'postgres.table': None, 'postgres.insert.query': None}}"),
    ({"postgres.insert.query": "INSERT INTO t VALUES (%s)"},
     f"{W}: config postgres.columns: expected the input fields of the query's %s placeholders, in order "
     f"(postgres.insert.query is set), found None"),
    ({"postgres.table": "t", "postgres.on.conflict": "ignore"},
     f"{W}: config postgres.on.conflict: expected one of ['error', 'nothing', 'update'], found 'ignore'"),
    ({"postgres.table": "t", "postgres.on.conflict": "update"},
     f"{W}: config postgres.conflict.columns: expected the columns of a unique key (postgres.on.conflict is "
     f"update), found None"),
    ({"postgres.table": "t", "postgres.url": "mysql://h/db"},
     f"{W}: config postgres.url: expected postgresql://user:password@host:port/dbname, found 'mysql://h/db'"),
    ({"postgres.table": "t", "postgres.query.timeout.secs": -1},
     f"{W}: config postgres.query.timeout.secs: expected an integer >= 0, found -1"),
])
def test_insert_config_errors_verbatim(conf, line):
    with pytest.raises(ConnectorConfigError) as e:
        insert_config(conf, W)
    assert str(e.value) == line


def test_lookup_config_errors_verbatim():
    with pytest.raises(ConnectorConfigError) as e:
        lookup_config({}, "postgres lookup bolt 'l'")
    assert str(e.value) == ("postgres lookup bolt 'l': config postgres.select.query: expected a SELECT with %s "
                            "placeholders, found None")


def test_url_and_address():
    cfg = insert_config({"postgres.table": "t", "postgres.url": "postgresql://u:p%40ss@h:5433/db"}, W)
    s = cfg.server
    assert (s.host, s.port, s.user, s.password, s.dbname) == ("h", 5433, "u", "p@ss", "db")
    assert s.address() == "postgresql://h:5433/db"  # never the password


# --- against the server ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def pg():
    s = postgres_or_skip()
    yield s
    s.destroy()


@pytest.fixture
def table(pg) -> str:
    pg.execute("DROP TABLE IF EXISTS t")
    pg.execute("CREATE TABLE t (word text PRIMARY KEY, n int NOT NULL CHECK (n >= 0), note text)")
    return "t"


def bolt(pg: Any, conf: dict[str, Any], fields: list[str], clock: Clock | None = None) -> tuple[Any, Delegate]:
    ctx = Context(comp="b", task=7, inputs={"src": fields})
    return make(PostgresInsertBolt, {"postgres.url": pg.url, "postgres.batch.size": 3, "postgres.batch.delay.ms": 0,
                                     **conf}, clock or Clock(), ctx)


def test_insert_sql():
    q = insert_sql("s.t", ("a", "b"), "update", ("a",))
    assert q.as_string(None) == ('INSERT INTO "s"."t" ("a", "b") VALUES (%s, %s) ON CONFLICT ("a") DO UPDATE SET '
                                 '"b" = EXCLUDED."b"')
    assert insert_sql("t", ("a",), "nothing", ()).as_string(None) == \
        'INSERT INTO "t" ("a") VALUES (%s) ON CONFLICT DO NOTHING'


def test_batches_are_acked_after_the_commit_with_the_tables_columns(pg, table):
    # no postgres.columns: SimpleJdbcMapper takes the table's columns the input has (word, n)
    b, d = bolt(pg, {"postgres.table": table}, ["word", "n", "other"])
    ins = [tup(i, [f"w{i}", i, "x"]) for i in range(3)]
    b.process(ins[0])
    b.process(ins[1])
    assert d.acked == [] and pg.execute("SELECT count(*) FROM t") == [(0,)]
    b.process(ins[2])
    assert d.acked == ins
    assert pg.execute("SELECT word, n, note FROM t ORDER BY n") == [("w0", 0, None), ("w1", 1, None), ("w2", 2, None)]
    b.process(ins[0])
    b.heron_poll()  # the delay (0 ms) has passed: the batch of one is written
    assert d.failed == [ins[0]]  # a duplicate key: the row is refused
    m = b.counts
    assert (m["written"], m["bad-inputs"], m["batches"], m["row-by-row"]) == (3, 1, 1, 1)


def test_a_graceful_stop_writes_the_batch_waiting_for_its_delay(pg, table):
    b, d = bolt(pg, {"postgres.table": table, "postgres.batch.delay.ms": 60_000}, ["word", "n"])
    ins = [tup(i, [f"w{i}", i]) for i in range(2)]
    for t in ins:
        b.process(t)
    b.heron_poll()  # the delay has not passed: nothing written yet
    assert d.acked == [] and pg.execute("SELECT count(*) FROM t") == [(0,)]
    b.cleanup()  # before: the batch was dropped with the connection
    assert d.acked == ins
    assert pg.execute("SELECT word, n FROM t ORDER BY n") == [("w0", 0), ("w1", 1)]


def test_a_refused_row_is_isolated_failed_and_logged_once(pg, table):
    b, d = bolt(pg, {"postgres.table": table, "postgres.columns": ["word", "n"], "postgres.input.id.fields": ["word"]},
                ["word", "n"])
    good1, bad, good2 = tup(1, ["a", 1]), tup(2, ["b", -5]), tup(3, ["c", 3])
    for t in (good1, bad, good2):
        b.process(t)
    assert d.acked == [good1, good2] and d.failed == [bad]
    assert pg.execute("SELECT word FROM t ORDER BY word") == [("a",), ("c",)]
    line = ("postgres insert bolt 'b' task 7: input b from 'src' (['b', -5]): row refused by table 't' (23514 "
            "CheckViolation: new row for relation \"t\" violates check constraint \"t_n_check\"); failing it")
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [line]
    # its replay (a new tuple id, the same input id) fails again without a second line
    again = tup(9, ["b", -5])
    b.process(again)
    b.heron_poll()
    assert d.failed == [bad, again]
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [line]


def test_upsert_updates_the_other_columns(pg, table):
    b, d = bolt(pg, {"postgres.table": table, "postgres.columns": ["word", "n"], "postgres.on.conflict": "update",
                     "postgres.conflict.columns": ["word"], "postgres.batch.size": 1}, ["word", "n"])
    b.process(tup(1, ["k", 1]))
    b.process(tup(2, ["k", 7]))
    assert len(d.acked) == 2 and pg.execute("SELECT word, n FROM t") == [("k", 7)]


def test_a_mapper_object_and_an_input_without_its_fields(pg, table):
    mapper = SimpleJdbcMapper([Column("word", "text"), Column("n", "int")])
    b, d = bolt(pg, {"postgres.table": table, "postgres.mapper": mapper, "postgres.batch.size": 1}, ["word"])
    t = tup(1, ["w"])
    b.process(t)
    assert d.failed == [t]
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        "postgres insert bolt 'b' task 7: input 1 from 'src' (['w']): expected fields ['word', 'n'], found "
        "['word']; failing it"]


def test_unknown_table_is_one_line_and_the_batch_fails(pg):
    b, d = bolt(pg, {"postgres.table": "nope", "postgres.batch.size": 1}, ["word"])
    t = tup(1, ["w"])
    b.process(t)
    assert d.failed == [t]
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        f"postgres insert bolt 'b' task 7: table 'nope' does not exist on postgresql://127.0.0.1:{pg.port}/postgres "
        f"(relation \"nope\" does not exist); expected it created before the topology writes; retrying with backoff "
        f"(up to 5 s)"]


def test_wrong_credentials_are_one_line(pg, table):
    url = f"postgresql://heron:wrong@127.0.0.1:{pg.port}/postgres"
    b, d = bolt(pg, {"postgres.url": url, "postgres.table": table, "postgres.batch.size": 1}, ["word", "n"])
    b.process(tup(1, ["w", 1]))
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        f"postgres insert bolt 'b' task 7: postgresql server postgresql://127.0.0.1:{pg.port}/postgres refused the "
        f"credentials of user 'heron'; expected the user and password of postgres.url or "
        f"postgres.user/postgres.password; retrying with backoff (up to 5 s)"]


def test_unreachable_server_is_retried_with_backoff_and_counted():
    port = free_port()  # nothing listens there
    clock = Clock()
    ctx = Context(comp="b", task=7, inputs={"src": ["word"]})
    b, d = make(PostgresInsertBolt, {"postgres.port": port, "postgres.table": "t", "postgres.batch.size": 1},
                clock, ctx)
    b.process(tup(1, ["w"]))
    line = Ours(f"postgres insert bolt 'b' task 7: postgresql server postgresql://127.0.0.1:{port}/postgres "
                f"unreachable (", Foreign("OperationalError"), "); retrying with backoff (up to 5 s)")
    assert [ln for ln, _ in d.lines if "unreachable" in ln] == [line]
    assert len(d.failed) == 1
    b.process(tup(2, ["w"]))  # within the backoff: kept, not written
    assert len(d.failed) == 1 and b.counts["connection-errors"] == 1
    waits = []
    for i in range(3):
        waits.append(round(b.conn.next_try - clock.t, 3))
        clock.t = b.conn.next_try
        b.heron_poll()  # the kept batch is written now, and fails
        b.process(tup(10 + i, ["w"]))  # kept until the next try
    assert waits == [0.1, 0.2, 0.4]
    assert b.counts["connection-errors"] == 4 and len(d.failed) == 4
    assert len([ln for ln, _ in d.lines if "unreachable" in ln]) == 1  # the same line: once per 10 s


def lookup(pg: Any, conf: dict[str, Any], fields: list[str]) -> tuple[Any, Delegate]:
    ctx = Context(comp="l", task=5, inputs={"src": fields})
    return make(PostgresLookupBolt, {"postgres.url": pg.url, **conf}, Clock(), ctx)


def test_lookup_emits_the_input_with_the_result_columns(pg, table):
    pg.execute("INSERT INTO t VALUES ('a', 1, 'first'), ('b', 2, 'second')")
    b, d = lookup(pg, {"postgres.select.query": "SELECT n, note FROM t WHERE word = %s",
                       "postgres.query.fields": ["word"], "postgres.output.fields": ["word", "src_id", "n", "note"]},
                  ["word", "src_id"])
    ta, tz = tup(1, ["a", 10]), tup(2, ["zz", 11])
    b.process(ta)
    b.process(tz)  # no row: nothing emitted, acked
    assert [v for v, _ in d.emitted] == [["a", 10, 1, "first"]]
    assert d.acked == [ta, tz]
    spec = PostgresLookupBolt.spec(name="l", config={"postgres.select.query": "SELECT 1",
                                                     "postgres.output.fields": ["word", "n"]})
    assert list(spec.outputs) == ["word", "n"]


def test_a_query_over_the_timeout_fails_its_input_with_one_line(pg):
    b, d = lookup(pg, {"postgres.select.query": "SELECT pg_sleep(%s) AS slept", "postgres.query.fields": ["s"],
                       "postgres.output.fields": ["s", "slept"], "postgres.query.timeout.secs": 1}, ["s"])
    t = tup(1, [3])
    b.process(t)
    assert d.failed == [t]
    assert [ln for ln, _ in d.lines if "timeout" in ln] == [
        f"postgres lookup bolt 'l' task 5: a query on postgresql://127.0.0.1:{pg.port}/postgres ran over "
        f"postgres.query.timeout.secs (canceling statement due to statement timeout); failing its inputs; retrying "
        f"with backoff (up to 5 s)"]


def test_streamlet_sink_through_an_in_process_topology(pg, table):
    from heron_py.api.streamlet.builder import Builder
    from heron_py.api.streamlet.config import Config
    from heron_py.api.streamlet.generator import Generator
    from heron_py.api.streamlet.runner import build_topology
    from heron_py.connectors.postgres import PostgresSink
    from heron_py.testing import run_in_process

    class Words(Generator):
        """Five words, then None: the source ends (a supplier's None would be an element, and the
        run would go on to run_in_process's call limit: 59 s in CI)."""

        def setup(self, context):
            self.it = iter(["a", "b", "a", "c", "a"])

        def get(self):
            return next(self.it, None)

    b = Builder()
    b.new_source(Words()).map(lambda w: {"word": w, "n": 1}) \
        .to_sink(PostgresSink(pg.url, "t", on_conflict="update", conflict_columns=["word"]))
    run_in_process(build_topology("t", Config(), b), idle_calls=20)
    assert pg.execute("SELECT word, n FROM t ORDER BY word") == [("a", 1), ("b", 1), ("c", 1)]


@pytest.mark.parametrize("copy", [True, False])
def test_copy_and_executemany_write_the_same_rows_and_isolate_the_same_bad_one(pg, copy):
    # a plain insert goes as one COPY per batch (postgres.copy, default true); JSONB, NULL and a
    # value the column refuses behave as with INSERT
    pg.execute("DROP TABLE IF EXISTS j")
    pg.execute("CREATE TABLE j (id int PRIMARY KEY, doc jsonb, note text)")
    b, d = bolt(pg, {"postgres.table": "j", "postgres.copy": copy, "postgres.input.id.fields": ["id"]},
                ["id", "doc", "note"])
    assert b.use_copy is copy
    ins = [tup(1, [1, {"a": [1, 2]}, None]), tup(2, [2, ["x"], "tab\there"]), tup(3, ["three", {}, "n"])]
    for t in ins:
        b.process(t)
    assert d.acked == ins[:2] and d.failed == [ins[2]]
    assert pg.execute("SELECT id, doc, note FROM j ORDER BY id") == [(1, {"a": [1, 2]}, None), (2, ["x"], "tab\there")]
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        "postgres insert bolt 'b' task 7: input three from 'src' (['three', {}, 'n']): row refused by table 'j' "
        "(22P02 InvalidTextRepresentation: invalid input syntax for type integer: \"three\"); failing it"]
    assert (b.counts["batches"], b.counts["row-by-row"]) == (0, 1)


def test_a_server_stopped_mid_run_is_retried_with_backoff_counted_and_written_after(pg, table):
    clock = Clock()
    b, d = bolt(pg, {"postgres.table": table, "postgres.columns": ["word", "n"], "postgres.batch.size": 1},
                ["word", "n"], clock)
    first = tup(1, ["a", 1])
    b.process(first)
    assert d.acked == [first]
    pg.stop()
    try:
        down = tup(2, ["b", 2])
        b.process(down)  # the open connection is gone: the batch fails, the spout replays it
        assert d.failed == [down] and b.counts["connection-errors"] == 1
        head = f"postgres insert bolt 'b' task 7: postgresql server {b.address} unreachable"
        assert d.lines == [(f"{head} (AdminShutdown: terminating connection due to administrator command); retrying "
                            f"with backoff (up to 5 s)", "warn")]
        clock.t = b.conn.next_try
        again = tup(3, ["b", 2])
        b.process(again)  # a new connection is refused
        assert d.failed == [down, again] and b.counts["connection-errors"] == 2
        assert d.lines[1] == (Ours(f"{head} (", Foreign("OperationalError"), "); retrying with backoff (up to 5 s)"),
                              "warn")
        assert round(b.conn.next_try - clock.t, 3) == 0.2  # the backoff doubles
    finally:
        pg.start()
    clock.t = b.conn.next_try
    last = tup(4, ["b", 2])
    b.process(last)
    assert d.acked == [first, last]
    assert pg.execute("SELECT word, n FROM t ORDER BY word") == [("a", 1), ("b", 2)]
    assert d.lines[-1] == (f"postgres insert bolt 'b' task 7: postgresql server {b.address} reachable again", None)
    m = b.counts
    assert (m["connection-errors"], m["written"], m["failed"]) == (2, 2, 2)
