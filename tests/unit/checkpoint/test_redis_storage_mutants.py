"""The Redis checkpoint store (heron_py/checkpoint/redis_storage.py) where the mutation run found no
test, against a real redis-server: the WAITAOF that makes a save or a marker durable (sent with
its arguments, on every write to a server that has it, once to one that has not, a write not
fsynced refused), the MULTI around a load and a removal, which markers a keyed listing trusts,
the members of the id set that are not ours, the messages of failed calls, the default retries,
a frozen server, and the first write of a store being a marker (the master's store).

The Debian redis-server here is 7.0, which has no WAITAOF (7.2 added it): ``Recorder`` sits
between the store and the server, forwards every command and its reply, records the commands,
and answers the commands it is given itself, as a 7.2 server answers WAITAOF."""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from heron_py.checkpoint.redis_storage import RedisCheckpointError, RedisCheckpointStorage
from heron_py.checkpoint.storage import (
    CheckpointError,
    CorruptCheckpointError,
    IncompleteCheckpointError,
    Marker,
    TransientCheckpointError,
    encode_frame,
)
from tests.foreign import Foreign, Ours
from tests.redis_server import RedisServer, free_port, redis_or_skip

SECRET = b"k" * 32
FSYNCED = b"*2\r\n:1\r\n:0\r\n"  # WAITAOF's reply: fsynced here (1), on no replica (0)
NOT_FSYNCED = b"*2\r\n:0\r\n:0\r\n"  # the timeout passed first
WRONGTYPE = "WRONGTYPE Operation against a key holding the wrong kind of value"


def _read_command(f: io.BufferedReader) -> tuple[bytes, list[bytes]] | None:
    """One command as a client sends it (an array of bulk strings): its bytes and its words."""
    head = f.readline()
    if not head:
        return None
    if not head.startswith(b"*"):
        raise ValueError(f"expected an array, found {head!r}")
    raw, words = head, []
    for _ in range(int(head[1:])):
        size = f.readline()
        word = f.read(int(size[1:]) + 2)
        raw += size + word
        words.append(word[:-2])
    return raw, words


def _read_reply(f: io.BufferedReader) -> bytes:
    """One RESP2 reply, whole (the store's client speaks RESP2: heron_py.common.redis_client)."""
    line = f.readline()
    if not line:
        raise ConnectionError("the server closed the connection")
    kind, n = line[:1], line[1:-2]
    if kind == b"$" and int(n) >= 0:
        return line + f.read(int(n) + 2)
    if kind == b"*" and int(n) > 0:
        return line + b"".join(_read_reply(f) for _ in range(int(n)))
    return line


class Recorder:
    """A proxy in front of a redis-server: records each command (name upper-cased, as Redis
    reads names), answers those named in ``answers`` itself, forwards the rest one by one."""

    def __init__(self, upstream: RedisServer, answers: dict[str, bytes] | None = None) -> None:
        self.answers = dict(answers or {})
        self.commands: list[tuple[str, ...]] = []
        self._upstream = upstream.port
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"redis://127.0.0.1:{self._listener.getsockname()[1]}/0"
        threading.Thread(target=self._accept, daemon=True).start()

    def names(self) -> list[str]:
        with self._lock:
            return [c[0] for c in self.commands]

    def sent(self, name: str) -> list[tuple[str, ...]]:
        with self._lock:
            return [c for c in self.commands if c[0] == name]

    def close(self) -> None:
        self._listener.close()
        for s in self._sockets:
            s.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self._upstream))
            self._sockets += [client, server]
            threading.Thread(target=self._serve, args=(client, server), daemon=True).start()

    def _serve(self, client: socket.socket, server: socket.socket) -> None:
        from_client, from_server = client.makefile("rb"), server.makefile("rb")
        try:
            while (command := _read_command(from_client)) is not None:
                raw, words = command
                name = words[0].decode().upper()
                with self._lock:
                    self.commands.append((name, *(w.decode(errors="replace") for w in words[1:])))
                if name in self.answers:
                    client.sendall(self.answers[name])
                else:
                    server.sendall(raw)
                    client.sendall(_read_reply(from_server))
        except (OSError, ValueError):
            pass
        finally:
            client.close()
            server.close()


@pytest.fixture
def redis(server: RedisServer) -> Iterator[Any]:
    c = server.client()
    c.flushdb()
    yield c
    c.close()


@pytest.fixture
def store(server: RedisServer, redis: Any) -> Iterator[RedisCheckpointStorage]:
    s = RedisCheckpointStorage(server.url, secret=SECRET)
    yield s
    s.close()


@pytest.fixture
def recorder(server: RedisServer, redis: Any) -> Iterator[Callable[..., Recorder]]:
    made: list[Recorder] = []

    def make(answers: dict[str, bytes] | None = None) -> Recorder:
        made.append(Recorder(server, answers))
        return made[-1]

    yield make
    for r in made:
        r.close()


def complete(s: RedisCheckpointStorage, cid: int, tasks: dict[int, bytes], topology: str = "wc") -> None:
    for t, data in tasks.items():
        s.save(topology, cid, t, data)
    s.mark_complete(topology, cid, tasks, {"c": tuple(tasks)})


def _dead_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there: the server is down


REFUSED = Foreign()  # redis-py's words for a refused connection


# --- a store's first write being a marker (the master's store writes nothing else) ---
def test_a_stores_first_write_can_be_the_marker(store: RedisCheckpointStorage, server: RedisServer) -> None:
    """mark_complete writes two commands (the id, the marker): WAITAOF's reply comes after both.
    Read after the first (before ae2eb7c), a store whose first write was a marker failed it with
    a TypeError after the marker had landed (on a 7.0 server; every marker on a 7.2 one): the
    master called a checkpoint failed that was complete."""
    tasks = RedisCheckpointStorage(server.url, secret=SECRET)  # the tasks' stores: their own processes
    tasks.save("wc", 1, 0, b"state of task 0")
    master = RedisCheckpointStorage(server.url, secret=SECRET)
    master.mark_complete("wc", 1, [0], {"spout": (0,)})
    master.mark_complete("wc", 2, [], {"spout": (0,)})
    assert master.completed_ids("wc") == [1, 2]
    assert master.load("wc", 1, 0) == b"state of task 0"


def test_a_marker_is_durable_on_a_server_with_waitaof(recorder: Callable[..., Recorder]) -> None:
    proxy = recorder({"WAITAOF": FSYNCED})
    master = RedisCheckpointStorage(proxy.url, secret=SECRET)
    master.mark_complete("wc", 1, [], {"spout": (0,)})
    master.mark_complete("wc", 2, [], {"spout": (0,)})
    assert proxy.sent("WAITAOF") == [("WAITAOF", "1", "0", "2000")] * 2
    assert master.completed_ids("wc") == [1, 2]


# --- WAITAOF ---
def test_every_write_waits_for_its_fsync_on_a_server_with_waitaof(recorder: Callable[..., Recorder]) -> None:
    """WAITAOF 1 0 <timeout in ms>: fsynced to this server's append-only file (1), no replica
    asked for (0), waiting at most the store's timeout (2 s by default); after every write, on
    the write's connection."""
    proxy = recorder({"WAITAOF": FSYNCED})
    s = RedisCheckpointStorage(proxy.url, secret=SECRET)
    s.save("wc", 1, 0, b"a")
    s.save("wc", 1, 1, b"b")
    s.mark_complete("wc", 1, [0, 1], {"c": (0, 1)})
    assert proxy.sent("WAITAOF") == [("WAITAOF", "1", "0", "2000")] * 3
    writes = [n for n in proxy.names() if n in ("EVALSHA", "SET", "WAITAOF")]
    assert writes == ["EVALSHA", "WAITAOF", "EVALSHA", "WAITAOF", "SET", "WAITAOF"]
    assert s.load("wc", 1, 1) == b"b"


def test_the_waitaof_timeout_is_the_stores_in_ms_and_never_0_which_waits_forever(
        recorder: Callable[..., Recorder]) -> None:
    proxy = recorder({"WAITAOF": FSYNCED})
    # the URL's own socket timeouts keep the connection usable with a store timeout this short
    s = RedisCheckpointStorage(proxy.url + "?socket_timeout=5&socket_connect_timeout=5", timeout_s=0.0004)
    s.save("wc", 1, 0, b"a")
    t = RedisCheckpointStorage(proxy.url, timeout_s=0.25)
    t.save("wc", 1, 1, b"b")
    assert proxy.sent("WAITAOF") == [("WAITAOF", "1", "0", "1"), ("WAITAOF", "1", "0", "250")]


def test_a_write_the_server_did_not_fsync_in_time_fails(recorder: Callable[..., Recorder]) -> None:
    proxy = recorder({"WAITAOF": NOT_FSYNCED})
    s = RedisCheckpointStorage(proxy.url, secret=SECRET)
    with pytest.raises(RedisCheckpointError) as e:
        s.save("wc", 1, 0, b"a")
    assert str(e.value) == (f"checkpoint 1 of topology 'wc': cannot save task 0's state: redis server {proxy.url}: "
                            f"expected the write fsynced to its append-only file within 2s, found it not fsynced")
    with pytest.raises(RedisCheckpointError) as e:
        s.mark_complete("wc", 1, [0], {"c": (0,)})
    assert str(e.value) == (f"checkpoint 1 of topology 'wc': cannot mark it complete: redis server {proxy.url}: "
                            f"expected the write fsynced to its append-only file within 2s, found it not fsynced")
    assert len(proxy.sent("WAITAOF")) == 2  # still asked: the next write may be fsynced


def test_a_server_without_waitaof_is_asked_once(recorder: Callable[..., Recorder], redis: Any) -> None:
    """Before 7.2 (this server) WAITAOF is an unknown command: asked at the first write, then
    never again (the server's config alone decides durability), every write still done."""
    proxy = recorder()  # forwards WAITAOF too: the 7.0 server answers "unknown command"
    s = RedisCheckpointStorage(proxy.url, secret=SECRET)
    s.save("wc", 1, 0, b"a")
    s.save("wc", 1, 1, b"b")
    s.mark_complete("wc", 1, [0, 1], {"c": (0, 1)})
    assert proxy.sent("WAITAOF") == [("WAITAOF", "1", "0", "2000")]
    assert s.load("wc", 1, 0) == b"a" and s.completed_ids("wc") == [1]


def test_a_failed_write_reports_its_own_error_not_the_waitaof_reply(recorder: Callable[..., Recorder],
                                                                     redis: Any) -> None:
    redis.set("heron-py:ckpt:{wc}:ids", b"a string where the set of ids belongs")
    for answers in ({}, {"WAITAOF": FSYNCED}):  # a server without WAITAOF, one with it
        proxy = recorder(answers)
        s = RedisCheckpointStorage(proxy.url, secret=SECRET)
        with pytest.raises(RedisCheckpointError) as e:
            s.save("wc", 1, 0, b"a")  # the first write: WAITAOF goes with it
        # the server's words for an error inside a script vary with its version
        assert str(e.value).startswith(f"checkpoint 1 of topology 'wc': cannot save task 0's state: redis server "
                                       f"{proxy.url}: ") and WRONGTYPE in str(e.value)
        assert proxy.sent("WAITAOF")


# --- MULTI ---
def test_a_load_and_a_removal_are_each_one_multi(recorder: Callable[..., Recorder]) -> None:
    """A load reads the marker and the state in one MULTI and a removal deletes in one, so a
    load racing garbage collection sees a checkpoint whole or gone."""
    proxy = recorder()
    s = RedisCheckpointStorage(proxy.url, secret=SECRET)
    complete(s, 1, {0: b"a"})
    complete(s, 2, {0: b"b"})
    del proxy.commands[:]
    assert s.load("wc", 1, 0) == b"a"
    assert proxy.commands == [("MULTI",), ("GET", "heron-py:ckpt:{wc}:1:complete"),
                              ("HGET", "heron-py:ckpt:{wc}:1:state", "0"), ("EXEC",)]
    del proxy.commands[:]
    s.remove("wc", [1, 2])
    assert proxy.commands == [
        ("MULTI",), ("DEL", "heron-py:ckpt:{wc}:1:state", "heron-py:ckpt:{wc}:1:complete"),
        ("SREM", "heron-py:ckpt:{wc}:ids", "1"),
        ("DEL", "heron-py:ckpt:{wc}:2:state", "heron-py:ckpt:{wc}:2:complete"),
        ("SREM", "heron-py:ckpt:{wc}:ids", "2"), ("EXEC",)]
    assert s.checkpoint_ids("wc") == []


# --- listings ---
def test_a_keyed_listing_trusts_only_markers_signed_under_its_key(store: RedisCheckpointStorage,
                                                                  server: RedisServer, redis: Any) -> None:
    complete(store, 1, {0: b"a"})
    complete(RedisCheckpointStorage(server.url), 2, {0: b"b"})  # without the key
    complete(RedisCheckpointStorage(server.url, secret=b"o" * 32), 3, {0: b"c"})  # another key
    complete(store, 4, {0: b"d"})
    redis.set("heron-py:ckpt:{wc}:4:complete", redis.get("heron-py:ckpt:{wc}:1:complete"))  # moved from 1
    complete(store, 5, {0: b"e"})
    assert store.completed_ids("wc") == [1, 5]
    assert RedisCheckpointStorage(server.url).completed_ids("wc") == [1, 2, 3, 4, 5]  # a tool: checksum only


def test_a_listing_without_the_key_lists_the_checkpoints_with_a_marker(server: RedisServer, redis: Any) -> None:
    tool = RedisCheckpointStorage(server.url)
    complete(tool, 2, {0: b"a"})
    tool.save("wc", 3, 0, b"under way")
    complete(tool, 7, {0: b"b"})
    assert tool.completed_ids("wc") == [2, 7]
    assert tool.completed_ids("none") == []


def test_a_marker_key_of_another_type_fails_the_keyed_listing_in_one_line(store: RedisCheckpointStorage,
                                                                          server: RedisServer, redis: Any) -> None:
    complete(store, 1, {0: b"a"})
    redis.delete("heron-py:ckpt:{wc}:1:complete")
    redis.hset("heron-py:ckpt:{wc}:1:complete", "x", "y")
    with pytest.raises(RedisCheckpointError) as e:
        store.completed_ids("wc")
    # redis-py may name the command before the server's words
    assert str(e.value).startswith(f"topology 'wc': cannot list its complete checkpoints: redis server "
                                   f"{server.url}: ") and str(e.value).endswith(WRONGTYPE)


def test_members_of_the_id_set_that_are_no_checkpoint_ids_are_skipped(store: RedisCheckpointStorage,
                                                                      redis: Any) -> None:
    complete(store, 3, {0: b"a"})
    redis.sadd("heron-py:ckpt:{wc}:ids", "0", "x", "-2", "1.5")
    assert store.checkpoint_ids("wc") == [3]
    assert store.completed_ids("wc") == [3]


# --- messages ---
def test_a_bad_task_id_to_save_is_refused(store: RedisCheckpointStorage, redis: Any) -> None:
    with pytest.raises(ValueError) as e:
        store.save("wc", 1, -1, b"x")
    assert str(e.value) == "checkpoint storage: task id must be an int >= 0, found -1"
    assert redis.keys("*") == []


def test_a_topology_name_with_any_letter_is_fine(store: RedisCheckpointStorage) -> None:
    complete(store, 1, {0: b"a"}, topology="WordCountX")
    assert store.load("WordCountX", 1, 0) == b"a"
    assert store.completed_ids("WordCountX") == [1]


def test_the_marker_read_alone(store: RedisCheckpointStorage, server: RedisServer, redis: Any) -> None:
    complete(store, 1, {0: b"a", 2: b"b"})
    assert store.marker("wc", 1) == Marker(frozenset({0, 2}), {"c": (0, 2)})
    with pytest.raises(IncompleteCheckpointError) as e:
        store.marker("wc", 2)
    assert str(e.value) == (f"checkpoint 2 of topology 'wc': not complete (no key heron-py:ckpt:{{wc}}:2:complete "
                            f"in {server.url}); only complete checkpoints are loaded")
    key = "heron-py:ckpt:{wc}:1:complete"
    body = b'{"tasks": "' + b"x" * 100 + b'"}'
    redis.set(key, encode_frame(body))
    for read in (lambda: RedisCheckpointStorage(server.url).marker("wc", 1),
                 lambda: RedisCheckpointStorage(server.url).load("wc", 1, 0)):
        with pytest.raises(CorruptCheckpointError) as c:
            read()
        assert str(c.value) == (f'checkpoint file {server.url} key {key}: expected {{"tasks": [ids], "packing": '
                                f'{{component: [ids]}}}}, found {body[:80]!r}')
    with pytest.raises(CorruptCheckpointError, match=r"version 2 \(signed under the topology secret\)"):
        store.marker("wc", 1)  # unsigned: refused where the key is held
    redis.delete(key)
    redis.hset(key, "x", "y")
    with pytest.raises(CorruptCheckpointError) as c:
        store.marker("wc", 1)
    assert str(c.value) == (f"checkpoint 1 of topology 'wc': its complete marker: {server.url} key {key}: expected "
                            f"a string, found another type")


def test_a_server_down_fails_each_call_in_one_line_after_the_default_retries() -> None:
    pytest.importorskip("redis")
    url = _dead_url()
    slept: list[float] = []

    def sleep(delay: float) -> None:
        slept.append(delay)
        if len(slept) > 10:
            raise AssertionError(f"retried without end: {slept}")

    s = RedisCheckpointStorage(url, secret=SECRET, sleep=sleep)
    with pytest.raises(TransientCheckpointError) as t:
        s.marker("wc", 1)  # read before every restore: the master retries it
    assert str(t.value) == Ours(f"checkpoint 1 of topology 'wc': its complete marker: redis server {url}: ", REFUSED)
    assert slept == [0.05, 0.1]
    slept.clear()
    with pytest.raises(RedisCheckpointError) as e:
        s.remove("wc", [1, 2])
    assert str(e.value) == Ours(f"topology 'wc': cannot remove checkpoints [1, 2]: redis server {url}: ", REFUSED)
    assert slept == [0.05, 0.1]
    slept.clear()
    with pytest.raises(RedisCheckpointError) as e:
        s.delete_topology("wc")
    assert str(e.value) == Ours(f"topology 'wc': cannot delete its checkpoints: redis server {url}: ", REFUSED)
    assert slept == [0.05, 0.1]


def test_an_error_without_words_is_named_by_its_type(recorder: Callable[..., Recorder]) -> None:
    proxy = recorder({"SMEMBERS": b"-\r\n"})  # a server's error reply with no text
    s = RedisCheckpointStorage(proxy.url, retries=0)
    with pytest.raises(RedisCheckpointError) as e:
        s.checkpoint_ids("wc")
    assert str(e.value) == f"topology 'wc': cannot list its checkpoints: redis server {proxy.url}: ResponseError"


def test_a_frozen_server_fails_a_call_within_the_timeout(tmp_path: Path) -> None:
    srv = redis_or_skip(tmp_path / "frozen")
    s = RedisCheckpointStorage(srv.url, timeout_s=0.3, retries=0)
    assert s.checkpoint_ids("wc") == []  # connected
    outcome: list[BaseException | list[int]] = []

    def call() -> None:
        try:
            outcome.append(s.checkpoint_ids("wc"))
        except BaseException as e:  # whatever it is, asserted below
            outcome.append(e)

    srv.freeze()
    try:
        caller = threading.Thread(target=call, daemon=True)
        caller.start()
        caller.join(10)
        finished = not caller.is_alive()
    finally:
        srv.thaw()
        srv.stop()
    assert finished, "a call to a frozen server hung past 10 s with a 0.3 s timeout"
    [error] = outcome
    assert isinstance(error, RedisCheckpointError) and isinstance(error, CheckpointError)
    assert str(error) == Ours(f"topology 'wc': cannot list its checkpoints: redis server {srv.url}: ", Foreign())
