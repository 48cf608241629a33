"""storm-jdbc's Flux classes (heron_py.flux.jdbc_classes): a Flux file with a HashMap, a
HikariCPConnectionProvider, Columns, a SimpleJdbcMapper and a JdbcInsertBolt loads and runs in
process against a real PostgreSQL; a JdbcLookupBolt's outputs are its mapper's fields; bad
constructorArgs are one error line each. The registration in heron_py.flux.classes (the lead's
file) is applied here the way it will be there."""

from __future__ import annotations

import pytest

from heron_py.flux import classes, jdbc_classes, kafka_classes
from heron_py.flux.errors import FluxError
from heron_py.flux.loader import load_flux
from heron_py.testing import run_in_process
from tests.postgres_server import postgres_or_skip

COMMON = """
components:
  - id: hikari
    className: java.util.HashMap
    configMethods:
      - name: put
        args: ["dataSourceClassName", "org.postgresql.ds.PGSimpleDataSource"]
      - name: put
        args: ["dataSource.url", "{jdbc}"]
      - name: put
        args: ["dataSource.user", "heron"]
      - name: put
        args: ["dataSource.password", "heron-secret"]
  - id: provider
    className: org.apache.storm.jdbc.common.HikariCPConnectionProvider
    constructorArgs: [{{ref: hikari}}]
  - id: word
    className: org.apache.storm.jdbc.common.Column
    constructorArgs: ["word", 12]
  - id: mapper
    className: org.apache.storm.jdbc.mapper.SimpleJdbcMapper
    constructorArgs: [[{{ref: word}}]]
  - id: out
    className: org.apache.storm.tuple.Fields
    constructorArgs: [["word", "seen"]]
  - id: lookupMapper
    className: org.apache.storm.jdbc.mapper.SimpleJdbcLookupMapper
    constructorArgs: [{{ref: out}}, [{{ref: word}}]]
spouts:
  - id: words
    className: org.apache.storm.testing.TestWordSpout
"""

INSERT = """
name: jdbc-insert
{common}
bolts:
  - id: store
    className: org.apache.storm.jdbc.bolt.JdbcInsertBolt
    constructorArgs: [{{ref: provider}}, {{ref: mapper}}]
    configMethods:
      - name: withInsertQuery
        args: ["INSERT INTO seen (word) VALUES (?)"]
      - name: withQueryTimeoutSecs
        args: [5]
  - id: lookup
    className: org.apache.storm.jdbc.bolt.JdbcLookupBolt
    constructorArgs: [{{ref: provider}}, "SELECT count(*) AS seen FROM seen WHERE word = ?", {{ref: lookupMapper}}]
  - id: log
    className: org.apache.storm.flux.wrappers.bolts.LogInfoBolt
streams:
  - from: words
    to: store
    grouping: {{type: SHUFFLE}}
  - from: words
    to: lookup
    grouping: {{type: SHUFFLE}}
  - from: lookup
    to: log
    grouping: {{type: SHUFFLE}}
"""


@pytest.fixture
def registered(monkeypatch):
    # what heron_py/flux/classes.py will do (see the report): the makers and the objects
    for name, maker in jdbc_classes.BOLTS.items():
        monkeypatch.setitem(classes.BUILTIN_BOLTS, name, maker)
    for name, make in jdbc_classes.OBJECTS.items():
        monkeypatch.setitem(kafka_classes.OBJECTS, name, make)


def _file(tmp_path, jdbc: str):
    f = tmp_path / "t.yaml"
    f.write_text(INSERT.format(common=COMMON.format(jdbc=jdbc)))
    return f


def test_a_flux_jdbc_insert_bolt_writes_and_a_lookup_bolt_declares_its_fields(registered, tmp_path):
    pg = postgres_or_skip()
    try:
        pg.execute("CREATE TABLE seen (word text NOT NULL)")
        topo = load_flux(_file(tmp_path, f"jdbc:postgresql://127.0.0.1:{pg.port}/postgres"), filter_file=None,
                         env={})
        assert list(topo.component("lookup").output("default").fields) == ["word", "seen"]
        res = run_in_process(topo, max_spout_calls=50, idle_calls=10, capture=["log"])
        words = {"nathan", "mike", "jackson", "golda", "bertels"}
        got = {r[0] for r in pg.execute("SELECT DISTINCT word FROM seen")}
        assert got and got <= words
        # every word looked up reaches the bolt after the lookup, with its count (the run polls
        # the lookup bolt until its last batch is answered: heron_busy)
        looked = res.received["log"]
        assert len(looked) == 50 and all(t.values[0] in words and isinstance(t.values[1], int) for t in looked)
    finally:
        pg.destroy()


def test_a_jdbc_url_that_is_not_postgresql_is_one_line(registered, tmp_path):
    with pytest.raises(FluxError) as e:
        load_flux(_file(tmp_path, "jdbc:mysql://127.0.0.1/test"), filter_file=None, env={})
    assert str(e.value) == (
        "flux file t.yaml: component 'provider' className "
        "'org.apache.storm.jdbc.common.HikariCPConnectionProvider': HikariCPConnectionProvider: dataSource.url "
        "(or jdbcUrl) expected jdbc:postgresql://host:port/dbname, found 'jdbc:mysql://127.0.0.1/test'")


def test_storm_placeholders():
    assert jdbc_classes.storm_placeholders("INSERT INTO t VALUES (?, ?)") == "INSERT INTO t VALUES (%s, %s)"
    assert jdbc_classes.storm_placeholders("SELECT %s") == "SELECT %s"


def test_a_jdbc_insert_bolt_with_both_a_table_and_a_query_is_one_line(registered, tmp_path):
    f = _file(tmp_path, "jdbc:postgresql://127.0.0.1:5432/postgres")
    f.write_text(f.read_text().replace("""      - name: withQueryTimeoutSecs""", """      - name: withTableName
        args: ["seen"]
      - name: withQueryTimeoutSecs"""))
    with pytest.raises(FluxError) as e:
        load_flux(f, filter_file=None, env={})
    assert str(e.value) == (
        "flux file t.yaml: bolt 'store' configMethods: JdbcInsertBolt takes withTableName or withInsertQuery, not "
        "both; found withTableName 'seen' and withInsertQuery 'INSERT INTO seen (word) VALUES (?)'")
