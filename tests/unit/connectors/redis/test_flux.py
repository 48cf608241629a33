"""storm-redis's Flux classes (heron_py.flux.redis_classes): a Flux file with a JedisPoolConfig,
a RedisDataTypeDescription, a mapper and a RedisStoreBolt loads and runs in process against a
real redis-server; bad constructorArgs are one error line each. The registration in
heron_py.flux.classes (the lead's file) is applied here the way it will be there."""

from __future__ import annotations

import pytest

from heron_py.flux import classes, kafka_classes, redis_classes
from heron_py.flux.errors import FluxError
from heron_py.flux.loader import load_flux
from heron_py.testing import run_in_process
from tests.redis_server import redis_or_skip

FLUX = """
name: redis-store
components:
  - id: pool
    className: org.apache.storm.redis.common.config.JedisPoolConfig
    constructorArgs: ["127.0.0.1", {port}, 2000, null, 0]
  - id: hash
    className: org.apache.storm.redis.common.mapper.RedisDataTypeDescription
    constructorArgs: ["HASH", "seen"]
  - id: mapper
    className: heron_py.flux.redis_classes.FieldNameBasedMapper
    constructorArgs: [{{ref: hash}}, "word", "word"]
spouts:
  - id: words
    className: org.apache.storm.testing.TestWordSpout
bolts:
  - id: store
    className: org.apache.storm.redis.bolt.RedisStoreBolt
    constructorArgs: [{{ref: pool}}, {{ref: mapper}}]
streams:
  - from: words
    to: store
    grouping: {{type: SHUFFLE}}
"""


@pytest.fixture
def registered(monkeypatch):
    # what heron_py/flux/classes.py will do (see the report): the makers and the objects
    for name, maker in redis_classes.BOLTS.items():
        monkeypatch.setitem(classes.BUILTIN_BOLTS, name, maker)
    for name, make in redis_classes.OBJECTS.items():
        monkeypatch.setitem(kafka_classes.OBJECTS, name, make)


def test_a_flux_redis_store_bolt_writes(registered, tmp_path):
    server = redis_or_skip(tmp_path / "redis")
    try:
        f = tmp_path / "t.yaml"
        f.write_text(FLUX.format(port=server.port))
        topo = load_flux(f, filter_file=None, env={})
        run_in_process(topo, max_spout_calls=50, idle_calls=10)
        # TestWordSpout's words, each HSET seen <word> <word>
        got = server.client().hgetall("seen")
        assert got and set(got) <= {w.encode() for w in ("nathan", "mike", "jackson", "golda", "bertels")}
        assert all(k == v for k, v in got.items())
    finally:
        server.stop()


def test_flux_errors_are_one_line(registered, tmp_path):
    bad = FLUX.format(port=1).replace('["HASH", "seen"]', '["ZSET", "seen"]')
    f = tmp_path / "t.yaml"
    f.write_text(bad)
    with pytest.raises(FluxError) as e:
        load_flux(f, filter_file=None, env={})
    assert str(e.value) == ("flux file t.yaml: component 'hash' className "
                            "'org.apache.storm.redis.common.mapper.RedisDataTypeDescription': "
                            "RedisDataTypeDescription: data type expected one of ['STRING', 'HASH', 'LIST', 'SET', "
                            "'SORTED_SET', 'HYPER_LOG_LOG', 'GEO', 'INCRBY', 'HINCRBY'], found 'ZSET'")
    f.write_text(FLUX.format(port=1).replace("[{ref: pool}, {ref: mapper}]", "[{ref: mapper}]"))
    with pytest.raises(FluxError) as e:
        load_flux(f, filter_file=None, env={})
    assert str(e.value) == ("flux file t.yaml: bolt 'store' constructorArgs: RedisStoreBolt takes [ref to a "
                            "JedisPoolConfig, ref to a store mapper], found [{'ref': 'mapper'}]")


# FLUX with a RedisFilterBolt between the words and the store: only a SET's members pass, on the
# filter's stream "kept" (storm-redis's third constructor argument)
FILTER_FLUX = FLUX.split("streams:")[0].replace("name: redis-store", "name: redis-filter").replace(
    "components:\n", """components:
  - id: allowed
    className: org.apache.storm.redis.common.mapper.RedisDataTypeDescription
    constructorArgs: ["SET", "allowed"]
  - id: filterMapper
    className: heron_py.flux.redis_classes.FieldNameBasedMapper
    constructorArgs: [{{ref: allowed}}, "word", "word", ["word"]]
""").replace("bolts:\n", """bolts:
  - id: filter
    className: org.apache.storm.redis.bolt.RedisFilterBolt
    constructorArgs: [{{ref: pool}}, {{ref: filterMapper}}, "kept"]
""") + """streams:
  - from: words
    to: filter
    grouping: {{type: SHUFFLE}}
  - from: filter
    to: store
    grouping: {{type: SHUFFLE, streamId: kept}}
"""


def test_a_flux_redis_filter_bolt_passes_the_allowed_words_on_its_stream(tmp_path):
    server = redis_or_skip(tmp_path / "redis")
    try:
        server.client().sadd("allowed", "nathan", "mike")
        f = tmp_path / "t.yaml"
        f.write_text(FILTER_FLUX.format(port=server.port))
        topo = load_flux(f, filter_file=None, env={})
        run_in_process(topo, max_spout_calls=40, idle_calls=10)  # TestWordSpout sleeps 100 ms a call
        # TestWordSpout's five words at random, only the SET's members through the filter to the store
        seen = set(server.client().hgetall("seen"))
        assert seen and seen <= {b"nathan", b"mike"}
        f.write_text(FILTER_FLUX.format(port=server.port).replace('["SET", "allowed"]', '["LIST", "allowed"]'))
        with pytest.raises(FluxError) as e:
            load_flux(f, filter_file=None, env={})
        assert str(e.value) == (
            "flux file t.yaml: bolt 'filter' redis filter bolt 'filter': config redis.data.type: expected a data "
            "type a filter can check, one of ['STRING', 'HASH', 'SET', 'SORTED_SET', 'HYPER_LOG_LOG', 'GEO', "
            "'INCRBY', 'HINCRBY'], found 'LIST'")
    finally:
        server.stop()
