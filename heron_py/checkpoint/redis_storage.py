"""Checkpoints in Redis (Storm's RedisKeyValueStateProvider, as heron-py's checkpoint storage).

Keys, under ``heron-py:ckpt:{TOPOLOGY}:`` (the braces make the topology a Redis Cluster hash tag,
so every key of a topology would sit on one node; heron-py itself talks to one server):

- ``ids``: a set of the topology's checkpoint ids, complete or not (listing never scans the
  keyspace with KEYS or SCAN);
- ``ID:state``: a hash, one field per task id, each value one task's framed state;
- ``ID:complete``: the framed marker ``{"tasks": [ids]}``, written last by ``mark_complete``.

Every value is framed as the file store's files are (``encode_frame``: length, sha256 and, with
the topology's checkpoint key, an HMAC over the topology, the checkpoint id, the field's name and
the data), so a value changed in Redis, or copied from another task's field or checkpoint, is
refused as :class:`CorruptCheckpointError` before anything unpickles it.

Atomicity: ``save`` is one Lua script (refuse when the marker exists, add the id, set the field),
``load`` reads the marker and the field in one MULTI (so garbage collection never shows half a
checkpoint), ``gc`` and ``delete_topology`` remove a checkpoint's keys in one MULTI or script.
Durability is Redis's: with ``appendonly yes`` and ``appendfsync always`` a write is on disk
when Redis answers; ``everysec`` may lose the last second on a host crash. On Redis 7.2 or newer
``save`` and ``mark_complete`` also send ``WAITAOF 1 0`` on the same connection and fail unless
the server fsynced the write (older servers, or AOF off: the server's config is all there is).

Errors: a connection refused, reset or timed out is retried ``retries`` times (after 0.05 s,
0.1 s, ...); then ``load`` raises :class:`TransientCheckpointError` (the master retries the same
checkpoint with backoff) and every other method :class:`RedisCheckpointError`, which is both a
``CheckpointError`` and an ``OSError``: a failed save or marker fails that checkpoint (the task's
``StatefulTask._save`` and the master's ``CheckpointDriver._marked`` catch it), and a listing the
master or the Kafka spout cannot make is retried as an unreadable folder would be.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from heron_py.checkpoint.storage import (
    COMPLETE_MARKER,
    CheckpointError,
    CheckpointStorage,
    CorruptCheckpointError,
    IncompleteCheckpointError,
    Marker,
    TransientCheckpointError,
    _binding,
    _check_id,
    decode_frame,
    encode_frame,
    marker_verifies,
)
from heron_py.common.config import MISSING_REDIS_PY, redact_redis_url
from heron_py.common.redis_client import redis_client

T = TypeVar("T")
KEY_PREFIX = "heron-py:ckpt:"

# KEYS: ids set, state hash, marker; ARGV: checkpoint id, task id, framed state. A save into a
# checkpoint already marked complete is refused (0), as the file store refuses it
_SAVE_LUA = """
if redis.call('EXISTS', KEYS[3]) == 1 then return 0 end
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
return 1
"""
# KEYS: ids set; ARGV: the topology's key prefix. Each id's keys go with the set, in one step
_DELETE_LUA = """
local ids = redis.call('SMEMBERS', KEYS[1])
for _, id in ipairs(ids) do
  redis.call('DEL', ARGV[1] .. id .. ':state', ARGV[1] .. id .. ':complete')
end
redis.call('DEL', KEYS[1])
return #ids
"""


class RedisCheckpointError(CheckpointError, OSError):
    """The Redis server could not be reached, refused our credentials or failed a command.

    An ``OSError`` too, so the callers that retry an unreadable checkpoint folder (the master's
    listing, the Kafka spout's) retry an unreachable server the same way."""


def _incomplete(topology: str, checkpoint_id: int, marker: str, where: str) -> IncompleteCheckpointError:
    return IncompleteCheckpointError(f"checkpoint {checkpoint_id} of topology {topology!r}: not complete (no key "
                                     f"{marker} in {where}); only complete checkpoints are loaded")


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


class RedisCheckpointStorage(CheckpointStorage):
    """Checkpoints on one Redis server, shared by every host of the topology.

    ``url``: redis://[user:password@]host:port/db, or rediss:// for TLS (redis-py's URL, its
    query options included). ``secret``: the topology's checkpoint key (values signed and
    checked, as every daemon does); without it only the checksum is checked (tools, tests).
    No connection is made until the first call.
    """

    def __init__(self, url: str, *, secret: bytes | None = None, timeout_s: float = 2.0, retries: int = 2,
                 retry_delay_s: float = 0.05, sleep: Callable[[float], None] = time.sleep) -> None:
        try:
            import redis
        except ImportError:
            raise CheckpointError(MISSING_REDIS_PY) from None
        self._redis = redis
        self.where = redact_redis_url(url)
        self._secret = secret
        self._retries = retries
        self._retry_delay_s = retry_delay_s
        self._sleep = sleep
        self._timeout_s = timeout_s
        self._waitaof: bool | None = None  # None: not tried yet; False: this server has no WAITAOF
        # redis-py's own retries off (heron_py.common.redis_client): ours below count and report them
        self.client: Any = redis_client(timeout_s, url)
        self._save_script = self.client.register_script(_SAVE_LUA)
        self._delete_script = self.client.register_script(_DELETE_LUA)

    def close(self) -> None:
        self.client.close()

    # --- the contract ---
    def save(self, topology: str, checkpoint_id: int, task_id: int, data: bytes) -> None:
        ids, state, marker = self._keys(topology, checkpoint_id)
        _check_id("task id", task_id, 0)
        value = encode_frame(data, self._secret, _binding(topology, checkpoint_id, str(task_id)))
        what = f"checkpoint {checkpoint_id} of topology {topology!r}: cannot save task {task_id}'s state"

        def write(pipe: Any) -> None:
            self._save_script(keys=[ids, state, marker], args=[checkpoint_id, task_id, value], client=pipe)

        if self._durably(write, what) == 0:
            raise CheckpointError(f"checkpoint {checkpoint_id} of topology {topology!r}: already complete, "
                                  f"task {task_id} cannot save into it")

    def mark_complete(self, topology: str, checkpoint_id: int, stored: Iterable[int],
                      packing: Mapping[str, Sequence[int]]) -> None:
        ids, state, marker = self._keys(topology, checkpoint_id)
        what = f"checkpoint {checkpoint_id} of topology {topology!r}: cannot mark it complete"
        tasks = frozenset(stored)
        have = {int(f) for f in self._call(lambda: self.client.hkeys(state), what) if f.isdigit()}
        missing = sorted(tasks - have)
        if missing:
            raise IncompleteCheckpointError(f"checkpoint {checkpoint_id} of topology {topology!r}: cannot mark "
                                            f"complete, task(s) {missing} reported saving state but "
                                            f"{self.where} key {state} has none for them")
        # the marker lists the tasks, so a field that went missing later is an error, not "no state"
        body = encode_frame(Marker(tasks, {c: tuple(t) for c, t in packing.items()}).encode(), self._secret,
                            _binding(topology, checkpoint_id, COMPLETE_MARKER))

        def write(pipe: Any) -> None:
            pipe.sadd(ids, checkpoint_id)  # a checkpoint of stateless tasks only: listed by its marker
            pipe.set(marker, body)

        self._durably(write, what)

    def marker(self, topology: str, checkpoint_id: int) -> Marker:
        _, _, marker = self._keys(topology, checkpoint_id)
        what = f"checkpoint {checkpoint_id} of topology {topology!r}: its complete marker"
        try:
            raw = self._call(lambda: self.client.get(marker), what)
        except RedisCheckpointError as e:
            if "WRONGTYPE" in str(e):  # someone wrote another type at our key
                raise CorruptCheckpointError(f"{what}: {self.where} key {marker}: expected a string, found "
                                             f"another type") from None
            # read before every load: a server down is a blip the master retries, as for load
            raise TransientCheckpointError(str(e)) from None
        if raw is None:
            raise _incomplete(topology, checkpoint_id, marker, self.where)
        if not isinstance(raw, bytes):
            raise CorruptCheckpointError(f"checkpoint file {self.where} key {marker}: expected a string, found "
                                         f"{type(raw).__name__}")
        return self._decode_marker(topology, checkpoint_id, marker, raw)

    def load(self, topology: str, checkpoint_id: int, task_id: int) -> bytes | None:
        _, state, marker = self._keys(topology, checkpoint_id)
        _check_id("task id", task_id, 0)
        what = f"checkpoint {checkpoint_id} of topology {topology!r}: task {task_id}'s state"

        def read() -> list[Any]:
            # one MULTI: garbage collection removes a checkpoint's keys in one MULTI too, so
            # this sees the whole checkpoint or none of it
            pipe = self.client.pipeline(transaction=True)
            pipe.get(marker)
            pipe.hget(state, str(task_id))
            return list(pipe.execute())

        try:
            raw_marker, raw = self._call(read, what)
        except RedisCheckpointError as e:
            if "WRONGTYPE" in str(e):  # someone wrote another type at our keys
                raise CorruptCheckpointError(f"{what}: {self.where} key {marker} or {state}: expected a string "
                                             f"and a hash, found another type") from None
            raise TransientCheckpointError(str(e)) from None
        if raw_marker is None:
            raise _incomplete(topology, checkpoint_id, marker, self.where)
        if task_id not in self._decode_marker(topology, checkpoint_id, marker, raw_marker).tasks:
            return None
        where = f"{self.where} key {state} field {task_id}"
        if raw is None:
            raise CorruptCheckpointError(f"checkpoint file {where}: missing, but the complete marker lists "
                                         f"task {task_id}")
        return decode_frame(raw, where, self._secret, _binding(topology, checkpoint_id, str(task_id)))

    def completed_ids(self, topology: str) -> list[int]:
        ids = self.checkpoint_ids(topology)
        if not ids:
            return []

        secret = self._secret

        def markers() -> list[Any]:
            # with the key the markers themselves, to check their MACs; else whether they exist
            pipe = self.client.pipeline(transaction=False)
            for c in ids:
                marker = self._keys(topology, c)[2]
                if secret is not None:
                    pipe.get(marker)
                else:
                    pipe.exists(marker)
            return list(pipe.execute())

        found = self._call(markers, f"topology {topology!r}: cannot list its complete checkpoints")
        if secret is None:
            return [c for c, n in zip(ids, found, strict=True) if n]
        return [c for c, raw in zip(ids, found, strict=True)
                if isinstance(raw, bytes) and marker_verifies(raw, f"{self.where} key {self._keys(topology, c)[2]}",
                                                              secret, topology, c)]

    def checkpoint_ids(self, topology: str) -> list[int]:
        ids = self._ids_key(topology)
        members = self._call(lambda: self.client.smembers(ids), f"topology {topology!r}: cannot list its checkpoints")
        # anything else in the set is not ours (the file store skips such names too)
        return sorted(int(m) for m in members if m.isdigit() and int(m) > 0)

    def remove(self, topology: str, checkpoint_ids: list[int]) -> None:
        if not checkpoint_ids:
            return

        def remove() -> None:
            # one MULTI: a reader sees each checkpoint whole or gone, never its marker alone
            pipe = self.client.pipeline(transaction=True)
            for c in checkpoint_ids:
                ids, state, marker = self._keys(topology, c)
                pipe.delete(state, marker)
                pipe.srem(ids, c)
            pipe.execute()

        self._call(remove, f"topology {topology!r}: cannot remove checkpoints {checkpoint_ids}")

    def delete_topology(self, topology: str) -> None:
        ids = self._ids_key(topology)
        self._call(lambda: self._delete_script(keys=[ids], args=[self._prefix(topology)]),
                   f"topology {topology!r}: cannot delete its checkpoints")

    # --- helpers ---
    def _decode_marker(self, topology: str, checkpoint_id: int, marker: str, raw: bytes) -> Marker:
        where = f"{self.where} key {marker}"
        body = decode_frame(raw, where, self._secret, _binding(topology, checkpoint_id, COMPLETE_MARKER))
        return Marker.decode(body, where)

    def _durably(self, write: Callable[[Any], None], what: str) -> Any:
        """``write``'s commands in a pipeline (one connection) followed, where the server has it,
        by ``WAITAOF 1 0``: the writes are fsynced to the AOF when this returns. The first
        command's reply."""

        def run() -> Any:
            pipe = self.client.pipeline(transaction=False)
            write(pipe)
            commands = len(pipe)  # WAITAOF's reply follows every command's
            if self._waitaof is not False:
                pipe.execute_command("WAITAOF", 1, 0, max(1, int(self._timeout_s * 1000)))
            replies = pipe.execute(raise_on_error=False)
            for reply in replies[:commands]:
                if isinstance(reply, Exception):
                    raise reply
            if self._waitaof is not False:
                fsync = replies[commands]
                if isinstance(fsync, self._redis.ResponseError):
                    # before Redis 7.2 (no such command) or with AOF off: the server's config decides
                    self._waitaof = False
                elif isinstance(fsync, Exception):
                    raise fsync
                elif int(fsync[0]) < 1:
                    raise RedisCheckpointError(f"{what}: redis server {self.where}: expected the write fsynced "
                                               f"to its append-only file within {self._timeout_s:g}s, found it "
                                               f"not fsynced")
                else:
                    self._waitaof = True
            return replies[0]

        return self._call(run, what)

    def _call(self, fn: Callable[[], T], what: str) -> T:
        """``fn`` with quick retries of a lost or slow connection; RedisCheckpointError for any
        Redis error then (one line: what failed, the server, its reason)."""
        r = self._redis
        attempt = 0
        while True:
            try:
                return fn()
            except r.AuthenticationError as e:
                raise RedisCheckpointError(
                    f"{what}: redis server {self.where}: authentication failed: expected the user and password "
                    f"the server accepts (heron_py.checkpoint.redis.url, or Storm's jedisPoolConfig.password), "
                    f"found the server's answer '{_one_line(e)}'") from None
            except (r.ConnectionError, r.TimeoutError) as e:
                if attempt >= self._retries:
                    raise RedisCheckpointError(f"{what}: redis server {self.where}: {_one_line(e)}") from None
            except r.RedisError as e:
                raise RedisCheckpointError(f"{what}: redis server {self.where}: {_one_line(e)}") from None
            attempt += 1
            self._sleep(self._retry_delay_s * attempt)

    def _prefix(self, topology: str) -> str:
        if not topology or topology.startswith(".") or any(c in topology for c in "/\\{}") or \
                any(ord(c) < 32 or c.isspace() for c in topology):
            raise ValueError(f"checkpoint storage: bad topology name {topology!r}: expected a plain name (no '/', "
                             f"'\\', '{{', '}}', spaces or control characters) not starting with '.'")
        return f"{KEY_PREFIX}{{{topology}}}:"

    def _ids_key(self, topology: str) -> str:
        return self._prefix(topology) + "ids"

    def _keys(self, topology: str, checkpoint_id: int) -> tuple[str, str, str]:
        """The ids set, the checkpoint's state hash and its marker."""
        _check_id("checkpoint id", checkpoint_id, 1)
        prefix = self._prefix(topology)
        return prefix + "ids", f"{prefix}{checkpoint_id}:state", f"{prefix}{checkpoint_id}:complete"
