"""The stream spout's quicker reply reader (heron_py/connectors/redis/replies.py) against a real
redis-server: every reply reads the same as with redis-py's own parser, for RESP2 and RESP3,
with a normal and a tiny socket read size (7 bytes: nearly every element then arrives in
pieces, so the hand-back to redis-py's code mid-array is exercised), including values holding
CRLF, empty and binary values, values larger than a read, nulls, integers, maps and errors;
commands packed byte for byte as redis-py packs them; and the spout's batch read path, through
the host's emit or a subclass's own emit."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from heron_py.connectors.redis import RedisStreamSpout
from heron_py.connectors.redis.replies import FastPacker, fast_parser_class, use_fast_protocol
from tests.redis_server import redis_or_skip

VALUES = [b"plain", b"", b"line one\r\nline two\r\n", b"\r\n", b"$5\r\n*2\r\n", bytes(range(256)),
          b"big " + b"y" * 200_000, "caf\u00e9 \u2603".encode()]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    s = redis_or_skip(tmp_path_factory.mktemp("redis"))
    c = s.client()
    pipe = c.pipeline(transaction=False)
    for i, v in enumerate(VALUES * 40):
        pipe.xadd("s", {"value": v, "n": str(i)} if i % 3 else {"value": v})
    pipe.execute()
    c.set("k", "v")
    c.close()
    yield s
    s.stop()


def client(server: Any, fast: bool, **kw: Any) -> Any:
    import redis

    c = redis.Redis.from_url(server.url, **kw)
    if fast:
        if fast_parser_class(3) is None:
            pytest.skip("hiredis is installed: redis-py uses it and the quicker reader is not used")
        assert use_fast_protocol(c)
    return c


def replies(c: Any, group: str) -> list[Any]:
    """One of each kind of reply, read through ``c``."""
    import redis

    out: list[Any] = []
    c.xgroup_create("s", group, id="0")
    while True:  # raw XREADGROUP replies (what the spout reads), 37 entries at a time
        r = c.execute_command("XREADGROUP", "GROUP", group, "c", "COUNT", 37, "STREAMS", "s", ">")
        out.append(r)
        if not r:
            break
    out.append(c.xreadgroup(group, "c", {"s": ">"}, count=5, block=1))  # nothing new: a null
    out.append(c.xrange("s", count=50))  # redis-py's callbacks on top of the reader
    out.append(c.xpending("s", group))
    out.append([(g["pending"], g["consumers"]) for g in c.xinfo_groups("s") if g["name"] == group.encode()])
    out.append(c.xautoclaim("s", group, "d", 0, count=10)[1])
    out.append((c.get("k"), c.get("missing"), c.incrby(f"counter-{group}", 5), c.ping(),
                c.incrbyfloat(f"float-{group}", 1.5), c.execute_command("CONFIG GET", "databases"),
                c.set(f"caf\u00e9-{group}", "\u2603 x\r\ny"), c.get(f"caf\u00e9-{group}")))
    with pytest.raises(redis.DataError) as bad:
        c.set("k", True)
    out.append(str(bad.value))
    pipe = c.pipeline(transaction=False)
    pipe.get("k").lpush("k", "x").xlen("s")  # an error inside an array of replies
    out.append([repr(x) if isinstance(x, Exception) else x for x in pipe.execute(raise_on_error=False)])
    with pytest.raises(redis.ResponseError) as e:
        c.xgroup_create("s", group, id="0")
    out.append(str(e.value))
    return out


@pytest.mark.parametrize("protocol", [2, 3])
@pytest.mark.parametrize("read_size", [65536, 7])
def test_every_reply_reads_as_with_redis_py_s_parser(server: Any, protocol: int, read_size: int) -> None:
    stock = client(server, False, protocol=protocol, socket_read_size=read_size)
    fast = client(server, True, protocol=protocol, socket_read_size=read_size)
    tag = f"{protocol}-{read_size}"
    want, got = replies(stock, f"stock-{tag}"), replies(fast, f"fast-{tag}")
    conn = fast.connection_pool.get_connection()
    assert type(conn._parser).__name__.startswith("FastArrays") and type(conn._command_packer) is FastPacker
    assert want[-7]["pending"] == 320 and len(want) == 9 + 10  # 320 entries read 37 a time (9 reads), then none
    assert got == want
    stock.close()
    fast.close()


@pytest.mark.parametrize("args", [
    ("XACK", "s", "g", b"1-0", b"2-0", "3-0"), ("SET", b"k", "caf\u00e9 \u2603", 12), ("PING",),
    (b"XREADGROUP", "GROUP", "g", "c", "COUNT", 500, "BLOCK", 50, "STREAMS", "s", ">"),
    ("CONFIG GET", "port"), ("INCRBYFLOAT", "k", 1.5), ("SET", "k", b"v" * 10_000), ("SET", "k", -7)])
def test_the_packer_sends_the_bytes_redis_py_would(args: tuple[Any, ...]) -> None:
    from redis import connection
    from redis._parsers import encoders

    conn: Any = connection  # redis-py is untyped
    enc: Any = encoders
    want = b"".join(conn.PythonRespSerializer(6000, enc.Encoder("utf-8", "strict", False).encode).pack(*args))
    assert b"".join(FastPacker().pack(*args)) == want


def test_decoded_responses_are_left_to_redis_py(server: Any) -> None:
    stock = client(server, False, decode_responses=True)
    fast = client(server, True, decode_responses=True)
    assert fast.xrange("s", count=3) == stock.xrange("s", count=3)
    assert isinstance(fast.xrange("s", count=1)[0][0], str)


def test_the_spout_s_client_reads_with_it(server: Any) -> None:
    from tests.connector_support import Clock, Context, make

    if fast_parser_class(3) is None:
        pytest.skip("hiredis is installed: redis-py uses it and the quicker reader is not used")
    s, _ = make(RedisStreamSpout, {"redis.url": server.url, "redis.stream": "s", "redis.group": "spout",
                                   "redis.create.group": True, "redis.block.ms": 0}, Clock(), Context("redis"))
    for _ in range(3):
        s.next_tuple()
    assert s.fast_replies is True
    assert type(s.client.connection_pool.get_connection()._parser).__name__.startswith("FastArrays")
    # the one value that is not UTF-8 (bytes 0 to 255) is malformed, 40 times
    assert s.counts["records"] == 320 and s.counts["malformed"] == 40 and len(s.inflight) == 280
    s.close()


class Recording(RedisStreamSpout):
    """A user's subclass that overrides emit: the spout's batch path must go through it."""

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.mine: list[tuple[list[Any], Any]] = []
        super().initialize(config, context)

    def emit(self, tup: Any, tup_id: Any = None, stream: str = "default", direct_task: int | None = None,
             need_task_ids: bool = False) -> list[int] | None:
        self.mine.append((list(tup), tup_id))
        return super().emit(tup, tup_id=tup_id, stream=stream)


def test_a_subclass_s_emit_still_sees_every_row(server: Any) -> None:
    from tests.connector_support import Clock, Context, make

    s, d = make(Recording, {"redis.url": server.url, "redis.stream": "s", "redis.group": "sub",
                            "redis.create.group": True, "redis.block.ms": 0}, Clock(), Context("redis"))
    for _ in range(3):
        s.next_tuple()
    assert len(s.mine) == 280 and s.mine == d.emitted
    assert s.mine[0][0][1] == "plain" and s.mine[0][1] == ("s", 1)
    s.close()


def test_fresh_rows_numbers_decodes_skips_and_names_the_malformed() -> None:
    from heron_py.connectors.redis.spout import fresh_rows

    entries = [[b"1-0", [b"value", b"a"]], [b"2-0", [b"value", b"\xff"]], [b"3-0", [b"other", b"x"]],
               [b"4-0", [b"n", b"1", b"value", b"b"]], [b"5-0", [b"value", b"in flight"]], [b"6-0", None]]
    records, bad, seq = fresh_rows(entries, ("value",), (b"value",), {"5-0": ("s", 1)}, 10)
    assert records == [(11, (b"1-0", ["1-0", "a"])), (12, (b"4-0", ["4-0", "b"]))] and seq == 12
    assert bad == [("2-0", "field b'value' is not UTF-8"), ("3-0", "expected fields ['value'], found ['other']"),
                   ("6-0", "it has no fields (deleted)")]
    two, _, _ = fresh_rows([[b"7-0", [b"n", b"1", b"value", b"c"]]], ("value", "n"), (b"value", b"n"), {}, 0)
    assert two == [(1, (b"7-0", ["7-0", "c", "1"]))]
