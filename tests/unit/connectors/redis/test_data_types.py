"""storm-redis's data types in the store, lookup and filter bolts, call by call against a real
redis-server: each data type's command as storm-redis's RedisStoreBolt, RedisLookupBolt and
RedisFilterBolt issue it (SORTED_SET's ZADD/ZSCORE/ZRANK, GEO's GEOADD/GEOPOS, LIST's LPOP,
SET's SCARD and SISMEMBER, ...), the filter's stream and anchoring, and each refused value or
option as one line, verbatim."""

from __future__ import annotations

from typing import Any

import pytest

from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.redis import RedisFilterBolt, RedisLookupBolt, RedisStoreBolt
from tests.connector_support import Clock, Context, Delegate, tup


class StreamDelegate(Delegate):
    """Also records each emit's stream and anchors."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, list[Any], list[Any]]] = []

    def emit(self, tup: Any, stream: Any, anchors: Any, direct_task: Any, need: Any, tup_id: Any) -> None:
        super().emit(tup, stream, anchors, direct_task, need, tup_id)
        self.sent.append((stream, list(tup), list(anchors or [])))


def bolt(cls: Any, server: Any, conf: dict[str, Any], fields: list[str] | None = None) -> tuple[Any, StreamDelegate]:
    d = StreamDelegate()
    b = cls(d)
    b.clock = Clock()
    ctx = Context(comp="b", task=7, inputs={"src": fields or ["key", "value"]})
    b.initialize({"topology.reliability.mode": "ATLEAST_ONCE", "redis.url": server.url, "redis.batch.size": 100,
                  "redis.batch.delay.ms": 0, **conf}, ctx)
    return b, d


def run(b: Any, inputs: list[Any]) -> None:
    """Each input processed; the batch written now (the bolt's poll after its delay of 0)."""
    for t in inputs:
        b.process(t)
    b.clock.t += 1.0
    b.heron_poll()


# --- store -----------------------------------------------------------------------------------
def test_store_sorted_set_adds_the_key_with_the_value_as_its_score(server, r):
    b, d = bolt(RedisStoreBolt, server, {"redis.data.type": "SORTED_SET", "redis.additional.key": "scores"})
    good = [tup(1, ["ann", 3]), tup(2, ["bob", "1.5"]), tup(3, ["ann", 7])]
    bad = tup(4, ["cy", "lots"])
    run(b, [*good, bad])
    assert d.acked == good and d.failed == [bad]
    assert r.zrange("scores", 0, -1, withscores=True) == [(b"bob", 1.5), (b"ann", 7.0)]
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        "redis store bolt 'b' task 7: input 4 from 'src' (['cy', 'lots']): SORTED_SET expected a number (the "
        "member's score), found 'lots'; failing it"]


def test_store_geo_adds_longitude_latitude_values(server, r):
    b, d = bolt(RedisStoreBolt, server, {"redis.data.type": "GEO", "redis.additional.key": "places"})
    good = [tup(1, ["Palermo", "13.361389:38.115556"]), tup(2, ["Catania", (15.087269, 37.502669)])]
    bad = [tup(3, ["Nowhere", "13.36"]), tup(4, ["Pole", "10:89.9"]), tup(5, ["Text", "east:north"])]
    run(b, [*good, *bad])
    assert d.acked == good and d.failed == bad
    assert round(r.geodist("places", "Palermo", "Catania", unit="km"), 1) == 166.3  # Redis's own GEODIST example
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        "redis store bolt 'b' task 7: input 3 from 'src' (['Nowhere', '13.36']): GEO expected a value "
        "'longitude:latitude' or a (longitude, latitude) pair, found '13.36'; failing it",
        "redis store bolt 'b' task 7: input 4 from 'src' (['Pole', '10:89.9']): GEO expected longitude in "
        "[-180, 180] and latitude in [-85.05112878, 85.05112878], found '10:89.9'; failing it",
        "redis store bolt 'b' task 7: input 5 from 'src' (['Text', 'east:north']): GEO expected a value "
        "'longitude:latitude' of numbers, found 'east'; failing it"]


def test_store_incrby_takes_integers_only(server, r):
    b, d = bolt(RedisStoreBolt, server, {"redis.data.type": "INCRBY"})
    good = [tup(1, ["n", 2]), tup(2, ["n", "3"]), tup(3, ["n", 4.0])]
    bad = [tup(4, ["n", 2.5]), tup(5, ["n", True]), tup(6, ["n", "x"])]
    run(b, [*good, *bad])
    assert d.acked == good and d.failed == bad and r.get("n") == b"9"
    assert [ln.split(": ", 2)[2] for ln, lvl in d.lines if lvl == "error"] == [
        "INCRBY expected an integer value, found 2.5; failing it",
        "INCRBY expected an integer value, found True; failing it",
        "INCRBY expected an integer value, found 'x'; failing it"]


def test_store_list_set_string_and_hyperloglog(server, r):
    for dt, check in (("LIST", lambda: r.lrange("k", 0, -1) == [b"a", b"b", b"a"]),
                      ("SET", lambda: r.smembers("k") == {b"a", b"b"}),
                      ("STRING", lambda: r.get("k") == b"a"),
                      ("HYPER_LOG_LOG", lambda: r.pfcount("k") == 2)):
        r.flushall()
        b, d = bolt(RedisStoreBolt, server, {"redis.data.type": dt})
        ts = [tup(1, ["k", "a"]), tup(2, ["k", "b"]), tup(3, ["k", "a"])]
        run(b, ts)
        assert d.acked == ts and check(), dt


# --- lookup: storm-redis's commands ----------------------------------------------------------
def lookups(server: Any, conf: dict[str, Any], keys: list[str]) -> tuple[list[Any], StreamDelegate]:
    b, d = bolt(RedisLookupBolt, server, conf)
    ts = [tup(i, [k, None]) for i, k in enumerate(keys)]
    run(b, ts)
    assert d.acked == ts and d.failed == []
    assert all(anchors == [t] for (_s, _v, anchors), t in zip(d.sent, ts, strict=True))
    return [values[1] for _s, values, _a in d.sent], d


def test_lookup_by_data_type_issues_storm_redis_commands(server, r):
    r.set("s", "text")
    r.rpush("l", "first", "second")
    r.hset("h", "f", "v")
    r.sadd("set", "a", "b", "c")
    r.zadd("z", {"ann": 3, "bob": 0})
    r.pfadd("hll", "a", "b")
    r.geoadd("g", (13.361389, 38.115556, "Palermo"))
    assert lookups(server, {"redis.data.type": "STRING"}, ["s", "nokey"])[0] == ["text", None]
    # LPOP, as storm-redis's lookup does: each lookup takes the list's head
    assert lookups(server, {"redis.data.type": "LIST"}, ["l", "l", "l"])[0] == ["first", "second", None]
    assert lookups(server, {"redis.data.type": "HASH", "redis.additional.key": "h"}, ["f", "g"])[0] == ["v", None]
    assert lookups(server, {"redis.data.type": "SET"}, ["set", "nokey"])[0] == [3, 0]  # SCARD
    assert lookups(server, {"redis.data.type": "SORTED_SET", "redis.additional.key": "z"},
                   ["ann", "bob", "cy"])[0] == [3.0, 0.0, None]
    assert lookups(server, {"redis.data.type": "HYPER_LOG_LOG"}, ["hll"])[0] == [2]
    (pos, missing), _ = lookups(server, {"redis.data.type": "GEO", "redis.additional.key": "g"}, ["Palermo", "X"])
    assert missing is None and [round(x, 4) for x in pos] == [13.3614, 38.1156]


# --- filter ----------------------------------------------------------------------------------
FILTER_FIELDS = {"redis.key.field": "word", "redis.output.fields": ["word", "n"]}


def filtered(server: Any, conf: dict[str, Any], words: list[str]) -> tuple[list[str], Any, StreamDelegate]:
    b, d = bolt(RedisFilterBolt, server, {**FILTER_FIELDS, **conf}, ["word", "n"])
    ts = [tup(i, [w, i]) for i, w in enumerate(words)]
    run(b, ts)
    assert d.acked == ts and d.failed == []  # every answered input acked, passed or not
    passed = [values[0] for _s, values, _a in d.sent]
    assert b.counts["passed"] == len(passed) and b.counts["dropped"] == len(ts) - len(passed)
    return passed, b, d


@pytest.mark.parametrize("conf, put", [
    ({"redis.data.type": "STRING"}, lambda r: r.set("here", 1)),
    ({"redis.data.type": "INCRBY"}, lambda r: r.incrby("here", 2)),
    ({"redis.data.type": "HASH", "redis.additional.key": "h"}, lambda r: r.hset("h", "here", 1)),
    ({"redis.data.type": "HINCRBY", "redis.additional.key": "h"}, lambda r: r.hincrby("h", "here", 1)),
    ({"redis.data.type": "SET", "redis.additional.key": "members"}, lambda r: r.sadd("members", "here")),
    # rank 0: the first member passes
    ({"redis.data.type": "SORTED_SET", "redis.additional.key": "z"}, lambda r: r.zadd("z", {"here": 0})),
    ({"redis.data.type": "HYPER_LOG_LOG"}, lambda r: r.pfadd("here", "x")),
    ({"redis.data.type": "GEO", "redis.additional.key": "g"}, lambda r: r.geoadd("g", (13.361389, 38.115556, "here"))),
], ids=lambda v: v["redis.data.type"] if isinstance(v, dict) else "")
def test_filter_by_data_type_passes_inputs_whose_key_is_there(server, r, conf, put):
    put(r)
    r.geoadd("g", (15.087269, 37.502669, "elsewhere"))  # a GEO set the missing member is not in
    assert filtered(server, conf, ["here", "gone", "here"])[0] == ["here", "here"]


def test_filter_emits_the_input_unchanged_anchored_on_its_stream(server, r):
    r.sadd("allowed", "a")
    _, _, d = filtered(server, {"redis.data.type": "SET", "redis.additional.key": "allowed",
                                "redis.filter.stream": "allowed"}, ["a", "b"])
    assert [(s, v) for s, v, _a in d.sent] == [("allowed", ["a", 0])]
    assert d.sent[0][2][0].values == ["a", 0]  # anchored to its input
    spec = RedisFilterBolt.spec(name="f", inputs={}, config={"redis.data.type": "STRING", **FILTER_FIELDS,
                                                             "redis.filter.stream": "allowed"})
    assert [(s.stream_id, list(s.fields)) for s in spec.outputs] == [("allowed", ["word", "n"])]


def test_filter_fails_an_input_the_server_refuses_and_goes_on(server, r):
    r.set("notaset", "x")
    r.sadd("members", "a")
    b, d = bolt(RedisFilterBolt, server, {**FILTER_FIELDS, "redis.data.type": "SET",
                                          "redis.additional.key": "notaset"}, ["word", "n"])
    t = tup(1, ["a", 1])
    run(b, [t])
    assert d.failed == [t] and d.sent == []
    assert d.lines[-1][0].startswith("redis filter bolt 'b' task 7: input 1 from 'src' (['a', 1]): the server "
                                     "refused the command (WRONGTYPE")


@pytest.mark.parametrize("conf, line", [
    ({"redis.data.type": "LIST", **FILTER_FIELDS},
     "redis filter bolt 'f': config redis.data.type: expected a data type a filter can check, one of ['STRING', "
     "'HASH', 'SET', 'SORTED_SET', 'HYPER_LOG_LOG', 'GEO', 'INCRBY', 'HINCRBY'], found 'LIST'"),
    ({"redis.data.type": "SET", **FILTER_FIELDS},
     "redis filter bolt 'f': config redis.additional.key: expected the set's name (data type SET: a filter checks "
     "the tuple's key is its member), found None"),
    ({"redis.data.type": "STRING"},
     "redis filter bolt 'f': config redis.output.fields: expected the output fields (a filter emits its input's "
     "values unchanged: name the input's fields), found None"),
    ({"redis.data.type": "SORTED_SET", **FILTER_FIELDS},
     "redis filter bolt 'f': config redis.additional.key: expected the sorted set's name (data type SORTED_SET), "
     "found None"),
])
def test_filter_options_refused_at_submit_verbatim(conf, line):
    with pytest.raises(ConnectorConfigError) as e:
        RedisFilterBolt.spec(name="f", inputs={}, config=conf)
    assert str(e.value) == line


def test_a_store_bolts_mapper_is_refused_at_submit_not_in_the_task():
    class NoValue:  # a store mapper without get_value_from_tuple
        def get_data_type_description(self):  # type: ignore[no-untyped-def]
            return None

        def get_key_from_tuple(self, tup):  # type: ignore[no-untyped-def]
            return tup

    with pytest.raises(ConnectorConfigError) as e:
        RedisStoreBolt.spec(name="s", inputs={}, config={"redis.mapper": NoValue()})
    assert str(e.value).startswith(
        "redis store bolt 's': config redis.mapper: expected a store mapper with get_data_type_description, "
        "get_key_from_tuple, get_value_from_tuple, found <")
    with pytest.raises(ConnectorConfigError) as e:
        RedisStoreBolt.spec(name="s", inputs={}, config={"redis.data.type": "GEO"})
    assert str(e.value) == ("redis store bolt 's': config redis.additional.key: expected the geo set's name (data "
                            "type GEO), found None")
    assert RedisStoreBolt.spec(name="s", inputs={}, config={"redis.data.type": "STRING"}).outputs == []
