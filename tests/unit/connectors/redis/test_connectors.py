"""The Redis connectors driven call by call against a real redis-server (no topology): the
spout's reads, XACKs, replays with backoff, own-pending recovery after a crash, XAUTOCLAIM of a
dead consumer's entries, malformed entries; the bolts' writes and lookups; every error line
verbatim (options, server unreachable with backoff and metrics, wrong credentials, unknown
stream or group). The component host is a small harness recording emits, acks and log lines;
the server is real."""

from __future__ import annotations

import time
from typing import Any

import pytest

from heron_py.connectors.base import ConnectorConfigError
from heron_py.connectors.redis import RedisLookupBolt, RedisStoreBolt, RedisStreamBolt, RedisStreamSpout
from heron_py.connectors.redis.config import stream_spout_config
from heron_py.connectors.redis.mappers import mapper_from_config
from heron_py.connectors.redis.spout import decode_entry, decode_flat
from tests import connector_support
from tests.connector_support import Clock, Delegate, tup
from tests.foreign import Foreign, Ours
from tests.redis_server import free_port, redis_or_skip


class Context(connector_support.Context):
    def __init__(self, comp: str = "redis", task: int = 3, inputs: dict[str, list[str]] | None = None) -> None:
        super().__init__(comp, task, inputs)


def make(cls: Any, conf: dict[str, Any], clock: Clock, ctx: Context | None = None) -> tuple[Any, Delegate]:
    return connector_support.make(cls, conf, clock, ctx or Context())


def spout(server, clock: Clock, **conf: Any) -> tuple[RedisStreamSpout, Delegate]:
    base = {"redis.url": server.url, "redis.stream": "s", "redis.group": "g", "redis.block.ms": 0}
    return make(RedisStreamSpout, {**base, **conf}, clock)


def group_with_entries(r: Any, n: int) -> list[str]:
    """Group "g" of stream "s" from its start, and the ids of ``n`` entries v0, v1, ... XADDed."""
    r.xgroup_create("s", "g", id="0", mkstream=True)
    return [r.xadd("s", {"value": f"v{i}"}).decode() for i in range(n)]


def ack_all_and_see_none_pending(s: RedisStreamSpout, r: Any, emitted: list[Any]) -> None:
    """Acks each of ``emitted`` (emit, id) pairs; after the spout's next loops the group has
    nothing pending: every XACK reached the server."""
    for _v, tid in emitted:
        s.ack(tid)
    pump(s, 2)
    assert r.xpending("s", "g")["pending"] == 0


def pump(s: RedisStreamSpout, n: int = 5) -> None:
    for _ in range(n):
        s.next_tuple()


# --- options ---------------------------------------------------------------------------------
W = "redis stream spout 'r'"


@pytest.mark.parametrize("conf, line", [
    ({}, "redis stream spout 'r': config redis.stream: expected the name of a stream, found None"),
    ({"redis.stream": "s", "redis.url": "http://h:1"},
     "redis stream spout 'r': config redis.url: expected redis://[user:password@]host:port/db, found 'http://h:1'"),
    ({"redis.stream": "s", "redis.claim.idle.ms": "soon"},
     "redis stream spout 'r': config redis.claim.idle.ms: expected an integer >= 1, found 'soon'"),
    ({"redis.stream": "s", "redis.create.group": "maybe"},
     "redis stream spout 'r': config redis.create.group: expected true or false, found 'maybe'"),
    ({"redis.stream": "s", "redis.fields": []},
     "redis stream spout 'r': config redis.fields: expected a non-empty list of names, found []"),
])
def test_spout_config_errors_verbatim(conf, line):
    with pytest.raises(ConnectorConfigError) as e:
        stream_spout_config(conf, W, "g", "c")
    assert str(e.value) == line


@pytest.mark.parametrize("conf, line", [
    ({"redis.data.type": "ZSET"}, "redis store bolt 'b': config redis.data.type: expected one of ['STRING', "
                                  "'HASH', 'LIST', 'SET', 'SORTED_SET', 'HYPER_LOG_LOG', 'GEO', 'INCRBY', "
                                  "'HINCRBY'], found 'ZSET'"),
    ({"redis.data.type": "HASH"}, "redis store bolt 'b': config redis.additional.key: expected the hash's name "
                                  "(data type HASH), found None"),
    ({"redis.mapper": "no_such_module.M"}, "redis store bolt 'b': config redis.mapper: expected an importable "
                                           "'module.Class' (ModuleNotFoundError: No module named 'no_such_module'), "
                                           "found 'no_such_module.M'"),
])
def test_mapper_config_errors_verbatim(conf, line):
    with pytest.raises(ConnectorConfigError) as e:
        mapper_from_config(conf, "redis store bolt 'b'", "store")
    assert str(e.value) == line


def test_decode_flat_reads_the_raw_reply_with_the_same_answers():
    keys = (b"value", b"n")
    assert decode_flat([b"value", b"a b", b"n", b"1"], ("value", "n"), keys) == (["a b", "1"], "")  # fast path
    assert decode_flat([b"n", b"1", b"value", b"a b"], ("value", "n"), keys) == (["a b", "1"], "")  # other order
    assert decode_flat([b"value", b"a", b"x", b"1"], ("value",), (b"value",)) == (["a"], "")  # an extra field
    assert decode_flat([b"other", b"1"], ("value",), (b"value",)) == (
        None, "expected fields ['value'], found ['other']")
    assert decode_flat([b"value", b"\xff"], ("value",), (b"value",)) == (None, "field b'value' is not UTF-8")
    assert decode_flat(None, ("value",), (b"value",)) == (None, "it has no fields (deleted)")


def test_decode_entry():
    assert decode_entry({b"value": b"a b", b"x": b"1"}, ("value",)) == (["a b"], "")
    assert decode_entry({b"other": b"1"}, ("value",)) == (None, "expected fields ['value'], found ['other']")
    assert decode_entry({b"value": b"\xff"}, ("value",)) == (None, "field b'value' is not UTF-8")


# --- the spout -------------------------------------------------------------------------------
def test_reads_acks_with_xack_and_replays_a_fail_with_backoff(server, r):
    ids = group_with_entries(r, 5)
    clock = Clock()
    s, d = spout(server, clock)
    pump(s)
    assert [e[0] for e in d.emitted] == [[ids[i], f"v{i}"] for i in range(5)]
    assert r.xpending("s", "g")["pending"] == 5
    for _v, tid in d.emitted[:4]:
        s.ack(tid)
    s.fail(d.emitted[4][1])
    pump(s, 1)
    assert r.xpending("s", "g")["pending"] == 1  # the 4 acks went out as one XACK
    assert len(d.emitted) == 5  # the fail waits its backoff (redis.retry.initial.delay.ms 100)
    clock.t += 0.11
    pump(s, 1)
    assert d.emitted[5][0] == [ids[4], "v4"]
    s.ack(d.emitted[5][1])
    pump(s, 1)
    assert r.xpending("s", "g")["pending"] == 0
    m = s.metrics_snapshot()
    assert m["acked"] == 5 and m["failed"] == 1 and m["retries"] == 1 and m["pending"] == 0 and m["lag"] == 0


def test_a_read_is_one_tree_its_ack_xacks_its_entries_and_its_fail_replays_each(server, r):
    """With the host's run emit bound (no hook or tap), a read's entries go under one int id:
    its ack XACKs them all, its fail fails each, replayed on its own with its own id."""
    ids = group_with_entries(r, 6)
    clock = Clock()
    s, d = spout(server, clock, **{"redis.batch.size": 3})
    runs: list[Any] = []
    s.heron_emit_tracked_run = lambda rows, run: runs.append((rows, run))
    for _ in range(10):  # the second read is sent ahead of the first's emit, taken a loop later
        if len(runs) < 2:
            pump(s, 1)
    assert [[row[0] for row in rows] for rows, _ in runs] == [ids[:3], ids[3:]] and d.emitted == []
    (_, run1), (_, run2) = runs
    s.heron_ack_many([run1])
    s.fail(run2)
    pump(s, 1)
    assert r.xpending("s", "g")["pending"] == 3  # the first read's three XACKed
    clock.t += 0.11  # the retries' backoff (redis.retry.initial.delay.ms 100)
    pump(s, 1)
    assert sorted(e[0][0] for e in d.emitted) == ids[3:]
    ack_all_and_see_none_pending(s, r, d.emitted)
    s.ack(run1)  # a late outcome changes nothing
    m = s.metrics_snapshot()
    assert m["acked"] == 6 and m["failed"] == 3 and m["pending"] == 0 and len(s.runs) == 0


def test_a_full_read_is_followed_by_the_next_one_sent_ahead_with_the_acks_due(server, r):
    ids = group_with_entries(r, 7)
    s, d = spout(server, Clock(), **{"redis.batch.size": 2})
    pump(s, 1)  # our own pending history first (none), from id 0
    pump(s, 1)  # entries 0, 1; entries 2, 3 asked for before they were emitted
    assert [e[0][0] for e in d.emitted] == ids[:2]
    assert s.ahead.sent and s.ahead.count == 2
    assert r.xpending("s", "g")["pending"] == 4  # the server answered the read sent ahead already
    for _v, tid in d.emitted:
        s.ack(tid)
    pump(s, 1)  # emits 2, 3; the read of 4, 5 carries the XACK of 0 and 1
    assert s.ahead.due == [ids[0].encode(), ids[1].encode()] and s.to_xack == []
    pump(s, 3)  # 4, 5 then 6 (a short read: nothing is sent behind it)
    assert [e[0][0] for e in d.emitted] == ids
    assert not s.ahead.sent
    assert r.xpending("s", "g")["pending"] == 5
    ack_all_and_see_none_pending(s, r, d.emitted[2:])


def test_a_read_sent_ahead_waits_while_the_spout_is_deactivated(server, r):
    ids = group_with_entries(r, 5)
    s, d = spout(server, Clock(), **{"redis.batch.size": 2})
    pump(s, 2)
    assert s.ahead.sent
    s.deactivate()
    pump(s, 3)
    assert [e[0][0] for e in d.emitted] == ids[:2]  # nothing while deactivated
    assert not s.ahead.sent and [e[0].decode() for e in s.held] == ids[2:4]
    s.activate()
    pump(s, 3)
    assert [e[0][0] for e in d.emitted] == ids  # the held ones first, in order, once each


def test_a_connection_cut_before_the_read_sent_ahead_ran_keeps_its_acks_due(server, r):
    ids = group_with_entries(r, 6)
    clock = Clock()
    s, d = spout(server, clock, **{"redis.batch.size": 2, "redis.reconnect.initial.ms": 100})
    pump(s, 2)  # 0, 1 emitted; 2, 3 read ahead
    s.ack(d.emitted[0][1])
    s.ack(d.emitted[1][1])
    r.client_pause(5000, all=False)  # write commands (XACK, XREADGROUP) wait: the next request is held
    try:
        pump(s, 1)  # 2, 3 emitted; XACK 0, 1 + the read of 4, 5 sent, not run
        r.client_kill_filter(skipme=True)  # the spout's connections cut: the held request is dropped
    finally:
        r.client_unpause()
    pump(s, 1)
    assert s.metrics_snapshot()["connection-errors"] == 1
    assert [t.decode() for t in s.to_xack] == ids[:2]  # due again: XACK is idempotent
    clock.t += 0.2  # past the reconnect backoff
    pump(s, 3)
    assert [e[0][0] for e in d.emitted] == ids  # each once
    assert [p["message_id"].decode() for p in r.xpending_range("s", "g", "-", "+", 10)] == ids[2:]
    ack_all_and_see_none_pending(s, r, d.emitted[2:])


def _ss_kill(port: int) -> None:
    import subprocess

    subprocess.run(["ss", "-K", "sport", "=", f":{port}"], capture_output=True, check=False)


def test_a_reply_lost_with_its_connection_is_read_again_at_the_reconnect(server, r):
    import shutil

    if shutil.which("ss") is None:
        pytest.skip("needs ss (iproute2) to reset a socket")
    ids = group_with_entries(r, 6)
    clock = Clock()
    # claims far off: what comes back comes from the walk of the consumer's own pending list
    s, d = spout(server, clock, **{"redis.batch.size": 2, "redis.claim.idle.ms": 600_000,
                                   "redis.reconnect.initial.ms": 100})
    pump(s, 3)  # 0..3 emitted; the read of 4, 5 sent ahead and answered: in the socket, not read
    deadline = time.monotonic() + 5
    while r.xpending("s", "g")["pending"] < 6 and time.monotonic() < deadline:
        time.sleep(0.01)
    port = s.ahead.conn._sock.getsockname()[1]
    _ss_kill(port)  # the spout's side reset: the reply in its receive buffer is gone
    pump(s, 1)
    if s.metrics_snapshot()["connection-errors"] != 1:
        pytest.skip("ss -K could not destroy the socket on this kernel (CONFIG_INET_DIAG_DESTROY)")
    assert [e[0][0] for e in d.emitted] == ids[:4]
    clock.t += 0.2  # past the reconnect's backoff
    pump(s, 3)
    assert [e[0][0] for e in d.emitted] == ids  # 4 and 5 back at the reconnect, once each, not claimed
    assert s.metrics_snapshot()["claimed"] == 0
    ack_all_and_see_none_pending(s, r, d.emitted)


def test_closing_with_a_read_sent_ahead_leaves_its_entries_to_the_next_start(server, r):
    ids = group_with_entries(r, 4)
    s1, d1 = spout(server, Clock(), **{"redis.batch.size": 2})
    pump(s1, 2)
    s1.ack(d1.emitted[0][1])
    pump(s1, 1)  # 2, 3 emitted... and the XACK of 0 sent ahead
    s1.close()
    s2, d2 = spout(server, Clock(), **{"redis.batch.size": 2})
    pump(s2, 4)
    assert [e[0][0] for e in d2.emitted] == ids[1:]  # what was not acked, from the consumer's own list


def test_a_restarted_task_reads_its_own_pending_entries_first(server, r):
    ids = group_with_entries(r, 3)
    clock = Clock()
    s1, d1 = spout(server, clock)
    pump(s1)
    s1.ack(d1.emitted[0][1])
    pump(s1, 1)
    # the task dies (no close): entries 1 and 2 stay pending for its consumer name
    s2, d2 = spout(server, clock)
    r.xadd("s", {"value": "v3"})
    pump(s2)
    assert [e[0][0] for e in d2.emitted][:2] == ids[1:]
    assert [e[0][1] for e in d2.emitted] == ["v1", "v2", "v3"]


def test_a_dead_consumers_entries_are_claimed_after_the_idle_time(server, r):
    ids = group_with_entries(r, 3)
    r.xreadgroup("g", "dead-consumer", {"s": ">"})  # read, never acked
    clock = Clock()
    s, d = spout(server, clock, **{"redis.claim.idle.ms": 200, "redis.claim.period.ms": 100})
    pump(s)
    assert d.emitted == []  # not idle long enough yet
    time.sleep(0.25)  # the server measures idle time with its own clock
    clock.t += 0.2
    pump(s, 1)
    assert [e[0][0] for e in d.emitted] == ids and s.metrics_snapshot()["claimed"] == 3
    ack_all_and_see_none_pending(s, r, d.emitted)


def test_a_malformed_entry_is_failed_logged_once_and_acknowledged(server, r):
    r.xgroup_create("s", "g", id="0", mkstream=True)
    bad = r.xadd("s", {"wrong": "x"}).decode()
    good = r.xadd("s", {"value": "ok"}).decode()
    s, d = spout(server, Clock())
    pump(s)
    assert [e[0] for e in d.emitted] == [[good, "ok"]]
    lines = [ln for ln, _lvl in d.lines if "malformed" in ln]
    assert lines == [f"redis stream spout 'redis' task 3: entry {bad} of stream 's' is malformed: expected fields "
                     f"['value'], found ['wrong']; failed and acknowledged (not emitted)"]
    assert r.xpending("s", "g")["pending"] == 1  # only the good one, still in flight
    assert s.metrics_snapshot()["malformed"] == 1


def test_unknown_stream_or_group_is_one_line_and_create_group_makes_it(server, r):
    clock = Clock()
    s, d = spout(server, clock)
    pump(s, 3)
    errs = [ln for ln, lvl in d.lines if lvl == "error"]
    assert errs == [f"redis stream spout 'redis' task 3: stream 's' or its consumer group 'g' does not exist on "
                    f"redis://127.0.0.1:{server.port}/0; expected them created (XGROUP CREATE s g 0 MKSTREAM) or "
                    f"redis.create.group true; retrying with backoff (up to 5 s)"]
    assert s.metrics_snapshot()["connection-errors"] == 1  # the backoff held the other two calls
    s2, d2 = spout(server, clock, **{"redis.create.group": True})
    r.xadd("s", {"value": "a"})  # after the spout's start: MKSTREAM made the stream at start id 0
    pump(s2, 3)
    assert [e[0][1] for e in d2.emitted] == ["a"]


def test_wrong_credentials_are_one_line(tmp_path):
    srv = redis_or_skip(tmp_path / "auth", password="right")
    try:
        clock = Clock()
        url = f"redis://:wrong@127.0.0.1:{srv.port}/0"
        s, d = make(RedisStreamSpout, {"redis.url": url, "redis.stream": "s", "redis.group": "g"}, clock)
        pump(s, 2)
        errs = [ln for ln, lvl in d.lines if lvl == "error"]
        assert errs == [f"redis stream spout 'redis' task 3: redis server redis://127.0.0.1:{srv.port}/0 refused the "
                        f"credentials (invalid username-password pair or user is disabled.); expected the username "
                        f"and password of redis.url or redis.username/redis.password; retrying with backoff "
                        f"(up to 5 s)"]
    finally:
        srv.stop()


def test_unreachable_server_is_retried_with_backoff_and_counted(server, r):
    port = free_port()  # nothing listens there
    clock = Clock()
    s, d = make(RedisStreamSpout, {"redis.port": port, "redis.stream": "s", "redis.group": "g",
                                   "redis.reconnect.initial.ms": 100}, clock)
    line = Ours(f"redis stream spout 'redis' task 3: redis server redis://127.0.0.1:{port}/0 unreachable (",
                Foreign("ConnectionError"), "); retrying with backoff (up to 5 s)")
    pump(s, 1)
    assert [ln for ln, _ in d.lines if "unreachable" in ln] == [line]
    pump(s, 5)  # within the backoff: no new attempt
    assert s.metrics_snapshot()["connection-errors"] == 1
    waits = []
    for _ in range(4):  # 0.1, 0.2, 0.4, 0.8 s
        waits.append(round(s.conn.next_try - clock.t, 3))
        clock.t = s.conn.next_try
        pump(s, 1)
    assert waits == [0.1, 0.2, 0.4, 0.8]
    assert s.metrics_snapshot()["connection-errors"] == 4
    assert len([ln for ln, _ in d.lines if "unreachable" in ln]) == 1  # the same line: once per 10 s


# --- the bolts -------------------------------------------------------------------------------
def bolt(cls: Any, server: Any, conf: dict[str, Any], fields: list[str]) -> tuple[Any, Delegate]:
    ctx = Context(comp="b", task=7, inputs={"src": fields})
    return make(cls, {"redis.url": server.url, "redis.batch.size": 3, "redis.batch.delay.ms": 0, **conf},
                Clock(), ctx)


def test_stream_bolt_xadds_and_acks_after_the_write(server, r):
    b, d = bolt(RedisStreamBolt, server, {"redis.stream": "out"}, ["word", "n"])
    t1, t2, t3 = tup(1, ["a", 1]), tup(2, ["b", {"x": 1}]), tup(3, ["c", None])
    b.process(t1)
    b.process(t2)
    assert d.acked == [] and r.xlen("out") == 0  # batched: not written, not acked
    b.process(t3)
    assert d.acked == [t1, t2, t3]
    assert [f for _id, f in r.xrange("out")] == [{b"word": b"a", b"n": b"1"}, {b"word": b"b", b"n": b'{"x": 1}'},
                                                 {b"word": b"c", b"n": b""}]


def test_store_bolt_incrby_and_a_bad_input_is_failed_with_one_line(server, r):
    b, d = bolt(RedisStoreBolt, server, {"redis.data.type": "INCRBY", "redis.key.field": "word",
                                         "redis.value.field": "n"}, ["word", "n"])
    good = [tup(1, ["a", 1]), tup(2, ["a", 2]), tup(3, ["b", 5])]
    bad = tup(4, ["c", "many"])
    b.process(bad)
    for t in good:
        b.process(t)
    assert d.failed == [bad] and d.acked == good
    assert r.get("a") == b"3" and r.get("b") == b"5"
    assert [ln for ln, lvl in d.lines if lvl == "error"] == [
        "redis store bolt 'b' task 7: input 4 from 'src' (['c', 'many']): INCRBY expected an integer value, found "
        "'many'; failing it"]


def test_store_bolt_hset_and_a_refused_command_fails_only_its_input(server, r):
    r.set("notahash", "x")
    b, d = bolt(RedisStoreBolt, server, {"redis.data.type": "HASH", "redis.additional.key": "counts"},
                ["key", "value"])
    b2, d2 = bolt(RedisStoreBolt, server, {"redis.data.type": "HASH", "redis.additional.key": "notahash"},
                  ["key", "value"])
    ts = [tup(1, ["a", "1"]), tup(2, ["b", "2"]), tup(3, ["c", "3"])]
    for t in ts:
        b.process(t)
        b2.process(t)
    assert r.hgetall("counts") == {b"a": b"1", b"b": b"2", b"c": b"3"} and d.acked == ts
    assert d2.failed == ts and d2.acked == []
    assert "WRONGTYPE" in d2.lines[-1][0] and d2.lines[-1][0].startswith("redis store bolt 'b' task 7: input 3 from "
                                                                         "'src' (['c', '3']): the server refused")


def test_lookup_bolt_emits_the_input_with_the_value(server, r):
    r.hset("counts", mapping={"a": "3", "b": "5"})
    b, d = bolt(RedisLookupBolt, server, {"redis.data.type": "HASH", "redis.additional.key": "counts",
                                          "redis.key.field": "word", "redis.emit.input": True,
                                          "redis.output.fields": ["word", "id", "count"]}, ["word", "id"])
    ts = [tup(1, ["a", 10]), tup(2, ["b", 11]), tup(3, ["zz", 12])]
    for t in ts:
        b.process(t)
    assert [e[0] for e in d.emitted] == [["a", 10, "3"], ["b", 11, "5"], ["zz", 12, None]]
    assert d.acked == ts
    spec = RedisLookupBolt.spec(name="look", inputs={}, config={"redis.data.type": "STRING"})
    assert spec.outputs == ["key", "value"]


def test_bolt_fails_the_batch_while_the_server_is_down_and_writes_after(server, r, tmp_path):
    srv = redis_or_skip(tmp_path / "down")
    b, d = bolt(RedisStreamBolt, srv, {"redis.stream": "out", "redis.batch.size": 1}, ["word"])
    b.clock.t = 10.0
    srv.stop()
    t1 = tup(1, ["a"])
    b.process(t1)
    assert d.failed == [t1] and b.counts["connection-errors"] == 1
    assert next(ln for ln, _ in d.lines if "unreachable" in ln).startswith(
        f"redis stream bolt 'b' task 7: redis server redis://127.0.0.1:{srv.port}/0 unreachable (ConnectionError: ")
    srv.start()
    t2 = tup(2, ["b"])
    b.process(t2)  # within the backoff: kept
    assert d.acked == []
    b.clock.t += 0.2
    b.heron_poll()
    assert d.acked == [t2] and srv.client().xlen("out") == 1
    srv.stop()


# --- the Streamlet source and sink -----------------------------------------------------------
def test_streamlet_source_and_sink_through_an_in_process_topology(server, r, caplog):
    from heron_py.api.streamlet.builder import Builder
    from heron_py.api.streamlet.config import Config
    from heron_py.api.streamlet.runner import build_topology
    from heron_py.connectors.redis.streamlet import RedisStreamGenerator, RedisStreamSink
    from heron_py.testing import run_in_process

    for i in range(5):
        r.xadd("in", {"value": f"a{i} b{i}"})
    bad = r.xadd("in", {"nope": "x"}).decode()
    b = Builder()
    b.new_source(RedisStreamGenerator(server.url, ["in"], block_ms=0)) \
        .flat_map(lambda line: line.split()).to_sink(RedisStreamSink(server.url, "out"))
    run_in_process(build_topology("t", Config(), b), idle_calls=20)
    assert sorted(f[b"value"].decode() for _id, f in r.xrange("out")) == sorted(
        [f"a{i}" for i in range(5)] + [f"b{i}" for i in range(5)])
    # the malformed entry was skipped with one line, and the run went on
    assert [rec.getMessage() for rec in caplog.records if "malformed" in rec.getMessage()] == [
        f"redis stream source task 1: entry {bad} of stream 'in' is malformed: expected fields ['value'], found "
        f"['nope']; skipped"]


def test_effectively_once_reads_by_id_from_the_checkpoint(server, r):
    from heron_py.api.state.state import HashMapState

    ids = [r.xadd("s", {"value": f"v{i}"}).decode() for i in range(4)]
    state = HashMapState()
    d = Delegate()
    s = RedisStreamSpout(d)
    s.clock = Clock()
    s.init_state(state)
    s.initialize({"topology.reliability.mode": "EFFECTIVELY_ONCE", "redis.url": server.url, "redis.stream": "s",
                  "redis.batch.size": 2, "redis.block.ms": 0}, Context())
    s.next_tuple()
    assert d.emitted == [([ids[0], "v0"], None), ([ids[1], "v1"], None)]  # no ids: no acks in this mode
    s.pre_save(1)
    assert state.get("last_id") == ids[1]
    s.next_tuple()  # v2, v3: emitted after the checkpoint, rolled back by the restore below
    d2 = Delegate()
    s2 = RedisStreamSpout(d2)
    s2.clock = Clock()
    s2.init_state(state)
    s2.initialize({"topology.reliability.mode": "EFFECTIVELY_ONCE", "redis.url": server.url, "redis.stream": "s",
                   "redis.block.ms": 0}, Context())
    s2.next_tuple()
    assert [e[0] for e in d2.emitted] == [[ids[2], "v2"], [ids[3], "v3"]]
    assert r.xinfo_stream("s")["groups"] == 0  # no consumer group in this mode


def test_a_mapper_missing_a_method_says_which() -> None:
    from heron_py.connectors.redis.mappers import RedisLookupMapper

    class HalfMapper(RedisLookupMapper):
        def get_key_from_tuple(self, tup):  # type: ignore[no-untyped-def]
            return tup

    with pytest.raises(NotImplementedError) as e:
        HalfMapper().to_tuple(None, None)
    assert str(e.value) == "HalfMapper does not implement to_tuple()"
