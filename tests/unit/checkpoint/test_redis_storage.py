"""Checkpoints in Redis (RedisCheckpointStorage) against a real redis-server: the contract of
LocalFsStorage (round trip, incomplete never loaded, ids ordered, gc, delete), values changed or
moved in Redis refused before anything unpickles them, a server down or a wrong password as one
clear line; and the config that selects it (heron-py's keys, Storm's topology.state.provider).

The contract tests of tests/unit/checkpoint/test_storage.py build LocalFsStorage and look at its
folders, so they cannot run over Redis unchanged: the same cases are written here for Redis."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.spout.spout import Spout
from heron_py.api.state.stateful_component import StatefulComponent
from heron_py.api.topology import TopologyBuilder
from heron_py.checkpoint.failures import is_transient_load_error
from heron_py.checkpoint.redis_storage import RedisCheckpointError, RedisCheckpointStorage
from heron_py.checkpoint.select import checkpoint_location, open_checkpoint_storage
from heron_py.checkpoint.storage import (
    CheckpointError,
    CorruptCheckpointError,
    IncompleteCheckpointError,
    LocalFsStorage,
    Marker,
    TransientCheckpointError,
)
from heron_py.cli.config_check import key_warnings
from heron_py.common.config import (
    MISSING_REDIS_PY,
    STORM_MEMORY_PROVIDER,
    STORM_REDIS_PROVIDER,
    ConfigError,
    StatefulConfig,
    check_topology_config,
)
from heron_py.common.framing import MsgType, frame_type
from heron_py.planner.model import PhysicalPlan, StmgrLocation, TopologyState
from heron_py.planner.packing import round_robin
from heron_py.runtime.host import HostOptions, make_host
from heron_py.runtime.stateful import StatefulTask
from heron_py.scheduler.kube import checkpoint_root_problem
from proto import heron_py_pb2 as pb
from tests.foreign import Foreign, Ours
from tests.redis_server import RedisServer, free_port, redis_or_skip

SECRET = b"k" * 32
EO = {"topology.reliability.mode": "EFFECTIVELY_ONCE"}


@pytest.fixture
def store(server: RedisServer) -> Iterator[RedisCheckpointStorage]:
    c = server.client()
    c.flushdb()
    c.close()
    s = RedisCheckpointStorage(server.url, secret=SECRET)
    yield s
    s.close()


def complete(s: RedisCheckpointStorage, cid: int, tasks: dict[int, bytes], topology: str = "wc") -> None:
    for t, data in tasks.items():
        s.save(topology, cid, t, data)
    s.mark_complete(topology, cid, tasks, {"c": tuple(tasks)})


def _dead_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"  # a port nothing listens on: the server is down


# --- the contract ---
def test_save_mark_load_roundtrip_and_key_layout(store: RedisCheckpointStorage, server: RedisServer) -> None:
    complete(store, 1, {0: b"spout state", 3: b""})
    assert store.load("wc", 1, 0) == b"spout state"
    assert store.load("wc", 1, 3) == b""
    assert store.load("wc", 1, 9) is None  # a task that saved nothing in it (a new task)
    c = server.client()
    assert sorted(c.keys("*")) == [b"heron-py:ckpt:{wc}:1:complete", b"heron-py:ckpt:{wc}:1:state",
                                   b"heron-py:ckpt:{wc}:ids"]
    assert c.smembers("heron-py:ckpt:{wc}:ids") == {b"1"}
    assert sorted(c.hkeys("heron-py:ckpt:{wc}:1:state")) == [b"0", b"3"]
    assert store.completed_ids("wc") == [1] and store.completed_ids("other") == []
    with pytest.raises(CheckpointError) as e:
        store.save("wc", 1, 5, b"late")
    assert str(e.value) == "checkpoint 1 of topology 'wc': already complete, task 5 cannot save into it"
    # a tool without the key (checksum only) reads the signed values, as it reads signed files
    assert RedisCheckpointStorage(server.url).load("wc", 1, 0) == b"spout state"


def test_incomplete_checkpoints_are_never_loaded(store: RedisCheckpointStorage, server: RedisServer) -> None:
    store.save("wc", 4, 0, b"half")
    with pytest.raises(IncompleteCheckpointError) as e:
        store.load("wc", 4, 0)
    assert str(e.value) == (f"checkpoint 4 of topology 'wc': not complete (no key heron-py:ckpt:{{wc}}:4:complete "
                            f"in {server.url}); only complete checkpoints are loaded")
    with pytest.raises(IncompleteCheckpointError) as e:
        store.mark_complete("wc", 5, [0, 3], {})
    assert str(e.value) == (f"checkpoint 5 of topology 'wc': cannot mark complete, task(s) [0, 3] reported "
                            f"saving state but {server.url} key heron-py:ckpt:{{wc}}:5:state has none for them")
    assert store.completed_ids("wc") == [] and store.checkpoint_ids("wc") == [4]


def test_ids_are_listed_in_numeric_order_and_epoch_ids_keep_every_bit(store: RedisCheckpointStorage) -> None:
    big = (7 << 32) | 3  # an id from the master's election epoch
    for cid in (10, 9, 2, big):
        complete(store, cid, {0: b"%d" % cid})
    store.save("wc", 11, 0, b"under way")
    assert store.completed_ids("wc") == [2, 9, 10, big]
    assert store.checkpoint_ids("wc") == [2, 9, 10, 11, big]
    assert store.load("wc", big, 0) == b"%d" % big


def test_gc_keeps_the_last_k_completed_and_the_newer_incomplete(store: RedisCheckpointStorage,
                                                                 server: RedisServer) -> None:
    for cid in (1, 2, 4, 6):
        complete(store, cid, {0: b"x%d" % cid})
    store.save("wc", 3, 0, b"aborted")  # older than the kept ones: abandoned
    store.save("wc", 7, 0, b"under way")  # newer: may be under way
    assert store.gc("wc") == [1, 2, 3]
    assert store.checkpoint_ids("wc") == [4, 6, 7] and store.completed_ids("wc") == [4, 6]
    assert store.gc("wc", keep_last=1) == [4]
    assert store.load("wc", 6, 0) == b"x6"
    c = server.client()
    assert sorted(c.keys("heron-py:ckpt:{wc}:*")) == [b"heron-py:ckpt:{wc}:6:complete", b"heron-py:ckpt:{wc}:6:state",
                                                       b"heron-py:ckpt:{wc}:7:state", b"heron-py:ckpt:{wc}:ids"]
    with pytest.raises(ValueError) as e:
        store.gc("wc", keep_last=0)
    assert str(e.value) == "gc of topology 'wc': keep_last must be >= 1, found 0"
    assert store.gc("none") == []


def test_gc_never_deletes_the_checkpoint_the_tasks_loaded(store: RedisCheckpointStorage) -> None:
    for cid in (1, 2, 3, 4):
        complete(store, cid, {0: b"a"})
    assert store.gc("wc", keep_last=2, protect=[1]) == [2]
    assert store.completed_ids("wc") == [1, 3, 4]
    assert store.gc("wc", keep_last=2) == [1]


def test_delete_topology_leaves_other_topologies(store: RedisCheckpointStorage, server: RedisServer) -> None:
    complete(store, 1, {0: b"a"})
    store.save("wc", 2, 0, b"b")
    complete(store, 1, {0: b"other"}, topology="wc2")
    store.delete_topology("wc")
    assert store.checkpoint_ids("wc") == [] and store.completed_ids("wc2") == [1]
    assert not server.client().keys("heron-py:ckpt:{wc}:*")
    store.delete_topology("wc")  # nothing to delete: fine


def test_a_value_changed_in_redis_is_refused(store: RedisCheckpointStorage, server: RedisServer) -> None:
    complete(store, 1, {0: b"state of task 0"})
    c = server.client()
    key = "heron-py:ckpt:{wc}:1:state"
    raw = bytearray(c.hget(key, "0"))
    raw[-1] ^= 1  # one bit of the pickled state flipped
    c.hset(key, "0", bytes(raw))
    with pytest.raises(CorruptCheckpointError) as e:
        store.load("wc", 1, 0)
    assert str(e.value).startswith(f"checkpoint file {server.url} key {key} field 0: checksum mismatch: header "
                                   f"says sha256 ")
    c.hset(key, "0", b"short")
    with pytest.raises(CorruptCheckpointError) as e:
        store.load("wc", 1, 0)
    assert str(e.value) == (f"checkpoint file {server.url} key {key} field 0: truncated header: expected 45 bytes, "
                            f"found 5")


def test_a_value_copied_from_another_task_or_checkpoint_is_refused(store: RedisCheckpointStorage,
                                                                   server: RedisServer) -> None:
    complete(store, 1, {0: b"state of task 0", 1: b"state of task 1"})
    complete(store, 2, {0: b"newer", 1: b"newer 1"})
    c = server.client()
    key = "heron-py:ckpt:{wc}:1:state"
    c.hset(key, "0", c.hget(key, "1"))  # its checksum is fine: only the MAC tells
    with pytest.raises(CorruptCheckpointError) as e:
        store.load("wc", 1, 0)
    assert str(e.value) == (f"checkpoint file {server.url} key {key} field 0: its MAC does not match the topology "
                            f"secret (the file was changed or moved from elsewhere after it was saved); refusing "
                            f"to load it")
    # checkpoint 1's marker copied over 2's (say, to hide a task of 2): refused as well
    c.set("heron-py:ckpt:{wc}:2:complete", c.get("heron-py:ckpt:{wc}:1:complete"))
    with pytest.raises(CorruptCheckpointError, match=r"key heron-py:ckpt:\{wc\}:2:complete: its MAC does not"):
        store.load("wc", 2, 1)
    # a value signed under another key (another topology's secret) is refused too
    other = RedisCheckpointStorage(server.url, secret=b"o" * 32)
    complete(other, 1, {0: b"forged"}, topology="wc3")
    c.hset(key, "1", c.hget("heron-py:ckpt:{wc3}:1:state", "0"))
    with pytest.raises(CorruptCheckpointError, match="its MAC does not match the topology secret"):
        store.load("wc", 1, 1)


def test_a_missing_field_or_another_type_is_corrupt_not_empty_state(store: RedisCheckpointStorage,
                                                                    server: RedisServer) -> None:
    complete(store, 1, {0: b"a", 1: b"b"})
    c = server.client()
    c.hdel("heron-py:ckpt:{wc}:1:state", "1")
    with pytest.raises(CorruptCheckpointError) as e:
        store.load("wc", 1, 1)
    assert str(e.value) == (f"checkpoint file {server.url} key heron-py:ckpt:{{wc}}:1:state field 1: missing, but "
                            f"the complete marker lists task 1")
    c.delete("heron-py:ckpt:{wc}:1:state")
    c.set("heron-py:ckpt:{wc}:1:state", b"a string where a hash belongs")
    with pytest.raises(CorruptCheckpointError) as e:
        store.load("wc", 1, 0)
    assert str(e.value) == (f"checkpoint 1 of topology 'wc': task 0's state: {server.url} key "
                            f"heron-py:ckpt:{{wc}}:1:complete or heron-py:ckpt:{{wc}}:1:state: expected a string and "
                            f"a hash, found another type")


def test_hostile_names_and_ids_are_refused(store: RedisCheckpointStorage) -> None:
    for bad in ("", ".x", "a/b", "a}:1:state:{b", "a b", "a\nb"):
        with pytest.raises(ValueError, match="bad topology name"):
            store.save(bad, 1, 0, b"x")
    with pytest.raises(ValueError) as e:
        store.save("wc", 0, 0, b"x")
    assert str(e.value) == "checkpoint storage: checkpoint id must be an int >= 1, found 0"
    with pytest.raises(ValueError) as e:
        store.load("wc", 1, -1)
    assert str(e.value) == "checkpoint storage: task id must be an int >= 0, found -1"


def test_a_restarted_server_keeps_the_checkpoints_and_the_store_reconnects(store: RedisCheckpointStorage,
                                                                            server: RedisServer) -> None:
    complete(store, 1, {0: b"kept"})
    server.restart()  # SIGTERM: redis-server writes its append-only file and exits; it reloads it at start
    assert store.load("wc", 1, 0) == b"kept" and store.completed_ids("wc") == [1]
    complete(store, 2, {0: b"after"})  # the new server has no scripts cached: they are loaded again
    assert store.load("wc", 2, 0) == b"after"
    store.delete_topology("wc")
    assert store.checkpoint_ids("wc") == []


# --- a server down, a wrong password ---
def test_server_down_load_is_transient_after_quick_retries_and_save_fails_the_checkpoint() -> None:
    pytest.importorskip("redis")
    url = _dead_url()
    slept: list[float] = []
    s = RedisCheckpointStorage(url, secret=SECRET, retries=2, sleep=slept.append, timeout_s=1)
    refused = Foreign()  # redis-py's words for a refused connection
    with pytest.raises(TransientCheckpointError) as e:
        s.load("wc", 1, 0)
    assert str(e.value) == Ours(f"checkpoint 1 of topology 'wc': task 0's state: redis server {url}: ", refused)
    assert slept == [0.05, 0.1]  # two quick retries, then the master's own backoff
    assert is_transient_load_error(f"TransientCheckpointError: {e.value}")
    with pytest.raises(RedisCheckpointError) as e2:
        s.save("wc", 1, 0, b"x")
    assert str(e2.value) == Ours(f"checkpoint 1 of topology 'wc': cannot save task 0's state: redis server {url}: ",
                                 refused)
    # an OSError too: the master's listing and the Kafka spout retry it as an unreadable folder
    with pytest.raises(OSError) as e3:
        s.completed_ids("wc")
    assert str(e3.value) == Ours(f"topology 'wc': cannot list its checkpoints: redis server {url}: ", refused)
    with pytest.raises(RedisCheckpointError, match="cannot mark it complete"):
        s.mark_complete("wc", 1, [0], {})


def test_wrong_password_is_one_line_without_the_password(tmp_path: Path) -> None:
    srv = redis_or_skip(tmp_path / "pw", password="right-one")
    try:
        wrong = srv.url.replace("right-one", "wrong-one")
        s = RedisCheckpointStorage(wrong, retries=0)
        with pytest.raises(RedisCheckpointError) as e:
            s.checkpoint_ids("wc")
        shown = srv.url.replace("right-one", "***")
        assert str(e.value) == (f"topology 'wc': cannot list its checkpoints: redis server {shown}: authentication "
                                f"failed: expected the user and password the server accepts "
                                f"(heron_py.checkpoint.redis.url, or Storm's jedisPoolConfig.password), found the "
                                f"server's answer 'invalid username-password pair or user is disabled.'")
        with pytest.raises(TransientCheckpointError, match="authentication failed"):
            s.load("wc", 1, 0)  # never a reason to drop the checkpoint: the master retries it
        ok = RedisCheckpointStorage(srv.url, secret=SECRET)
        complete(ok, 1, {0: b"with a password"})
        assert ok.load("wc", 1, 0) == b"with a password"
    finally:
        srv.stop()


def test_without_redis_py_one_line_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis", None)  # import redis raises ImportError
    with pytest.raises(CheckpointError) as e:
        RedisCheckpointStorage("redis://127.0.0.1:6379/0")
    assert str(e.value) == MISSING_REDIS_PY == (
        "checkpoint storage redis: redis-py is not installed: expected the heron-py[redis] extra "
        "(pip install 'heron-py[redis]'), found no module 'redis'")
    # and a topology that asks for it is refused at submit, not when its master starts
    with pytest.raises(ConfigError) as c:
        check_topology_config({**EO, "heron_py.checkpoint.storage": "redis",
                               "heron_py.checkpoint.redis.url": "redis://127.0.0.1:6379/0"}, {})
    assert str(c.value) == MISSING_REDIS_PY


class Pos(Spout, StatefulComponent):
    outputs = ["w"]

    def init_state(self, stateful_state: Any) -> None:
        self.state = stateful_state

    def pre_save(self, checkpoint_id: str) -> None:
        self.state.put("pos", 1)

    def next_tuple(self) -> None:
        pass


def test_a_task_whose_save_or_load_meets_a_server_down_reports_it_and_goes_on() -> None:
    """StatefulTask's own handling: a failed save fails that checkpoint (the master aborts it), a
    failed load is reported as transient (the master retries the same checkpoint)."""
    pytest.importorskip("redis")
    b = TopologyBuilder("eo")
    b.add_spout("pos", Pos, par=1)
    b.set_config(EO)
    topo = b.build()
    plan = PhysicalPlan(topo, round_robin(topo, 1), (StmgrLocation(0, "h", 1, 2),), TopologyState.RUNNING, 1)
    task = plan.packing.tasks_of("pos")[0]
    sent: list[bytes] = []
    host = make_host(plan, task, sent.extend, HostOptions())
    url = _dead_url()
    rt = StatefulTask(host, RedisCheckpointStorage(url, retries=0), "eo", sent.extend, align_bytes=1 << 20,
                      log=logging.getLogger("test"))
    rt.restore(1, 0)
    rt.start_processing(1)
    sent.clear()
    rt.start_checkpoint(3)
    [saved] = [f for f in sent if frame_type(f) == MsgType.CHECKPOINT_SAVED]
    msg = pb.CheckpointSaved()
    msg.ParseFromString(saved[6:])
    assert msg.failed and msg.error.startswith(f"RedisCheckpointError: checkpoint 3 of topology 'eo': cannot save "
                                               f"task {task}'s state: redis server {url}: ")
    sent.clear()
    rt.restore(2, 3)
    [restored] = [f for f in sent if frame_type(f) == MsgType.STATE_RESTORED]
    r = pb.StateRestored()
    r.ParseFromString(restored[6:])
    assert not r.ok and r.error.startswith("TransientCheckpointError: checkpoint 3 of topology 'eo'")
    assert is_transient_load_error(r.error)


# --- the config that selects it ---
STORM_POOL = json.dumps({"jedisPoolConfig": {"host": "10.0.0.5", "port": 6380, "timeout": 500, "database": 2,
                                             "password": "p@ss/word"}})


def _err(config: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as e:
        StatefulConfig.from_config({**EO, **config})
    return str(e.value)


def test_storms_redis_provider_and_its_json_config_map_onto_heron_pys_keys() -> None:
    cfg = StatefulConfig.from_config({**EO, "topology.state.provider": STORM_REDIS_PROVIDER,
                                      "topology.state.provider.config": STORM_POOL})
    assert (cfg.storage, cfg.redis_url, cfg.redis_timeout_s) == ("redis", "redis://:p%40ss%2Fword@10.0.0.5:6380/2",
                                                                 0.5)
    # no config: Storm's defaults; a dict (a Python topology's config) as well as JSON text
    assert StatefulConfig.from_config({**EO, "topology.state.provider": STORM_REDIS_PROVIDER}).redis_url == \
        "redis://127.0.0.1:6379/0"
    assert StatefulConfig.from_config({**EO, "topology.state.provider": STORM_REDIS_PROVIDER,
                                       "topology.state.provider.config": {"jedisPoolConfig": {"port": 7000}}}
                                      ).redis_url == "redis://127.0.0.1:7000/0"
    # heron-py's keys win over Storm's config
    own = StatefulConfig.from_config({**EO, "topology.state.provider": STORM_REDIS_PROVIDER,
                                      "topology.state.provider.config": STORM_POOL,
                                      "heron_py.checkpoint.redis.url": "rediss://h:1/0",
                                      "heron_py.checkpoint.redis.timeout.secs": "3"})
    assert (own.redis_url, own.redis_timeout_s) == ("rediss://h:1/0", 3.0)
    mem = StatefulConfig.from_config({**EO, "topology.state.provider": STORM_MEMORY_PROVIDER,
                                      "topology.state.provider.config": STORM_POOL})
    assert mem.storage == "localfs" and StatefulConfig.from_config({}).storage == "localfs"
    # read keys now: no "unknown" or "accepted but not used" warning for them
    assert key_warnings(["topology.state.provider", "topology.state.provider.config",
                         "heron_py.checkpoint.storage", "heron_py.checkpoint.redis.url"]) == []


HBASE = "org.apache.storm.hbase.state.HBaseKeyValueStateProvider"


def test_storms_keys_pass_through_a_topology_that_keeps_no_state() -> None:
    # Storm runs a topology without stateful bolts whatever provider it names: so does heron-py
    for mode in ("ATLEAST_ONCE", "ATMOST_ONCE"):
        cfg = StatefulConfig.from_config({"topology.reliability.mode": mode,
                                          "topology.state.provider": HBASE,
                                          "topology.state.provider.config": "{not json"})
        assert cfg.storage == "localfs" and cfg.redis_url == ""
    # heron-py's own keys are checked in every mode, as every other key is
    with pytest.raises(ConfigError):
        StatefulConfig.from_config({"heron_py.checkpoint.storage": "s3"})


def test_bad_storage_config_is_one_line_each() -> None:
    assert _err({"topology.state.provider": "org.apache.storm.hbase.state.HBaseKeyValueStateProvider"}) == (
        "config topology.state.provider: expected org.apache.storm.redis.state.RedisKeyValueStateProvider or "
        "org.apache.storm.state.InMemoryKeyValueStateProvider (heron-py keeps state in Redis or in files), found "
        "'org.apache.storm.hbase.state.HBaseKeyValueStateProvider'")
    assert _err({"topology.state.provider": STORM_REDIS_PROVIDER,
                 "topology.state.provider.config": '{"jedisPoolConfig": {"password": "s3cret"'}) == (
        'config topology.state.provider.config: expected a JSON object such as {"jedisPoolConfig": {"host": '
        '"127.0.0.1", "port": 6379}}, found malformed JSON (Expecting \',\' delimiter: line 1 column 42 (char 41))')
    assert _err({"topology.state.provider": STORM_REDIS_PROVIDER,
                 "topology.state.provider.config": '{"jedisClusterConfig": {"nodes": ["h:7000"]}}'}) == (
        'config topology.state.provider.config: expected "jedisPoolConfig" (one Redis server), found '
        '"jedisClusterConfig" (heron-py does not keep checkpoints in a Redis Cluster)')
    assert _err({"topology.state.provider": STORM_REDIS_PROVIDER,
                 "topology.state.provider.config": '{"jedisPoolConfig": {"port": "6379x"}}'}) == (
        "config topology.state.provider.config: jedisPoolConfig.port: expected an integer 1-65535, found '6379x'")
    assert _err({"topology.state.provider": STORM_REDIS_PROVIDER,
                 "topology.state.provider.config": '{"jedisPoolConfig": {"hots": "h"}}'}) == (
        "config topology.state.provider.config: jedisPoolConfig: expected the keys host, port, timeout, database, "
        "password, found hots")
    assert _err({"heron_py.checkpoint.storage": "s3"}) == (
        "config heron_py.checkpoint.storage: expected one of localfs, redis, found 's3'")
    assert _err({"heron_py.checkpoint.storage": "redis"}) == (
        "config heron_py.checkpoint.redis.url: heron_py.checkpoint.storage is redis: expected "
        "redis://[user:password@]host:port/db (rediss:// for TLS), found it unset")
    assert _err({"heron_py.checkpoint.storage": "redis", "heron_py.checkpoint.redis.url": "http://u:pw@h:1/x"}) == (
        "config heron_py.checkpoint.redis.url: expected redis://[user:password@]host:port/db (rediss:// for TLS), "
        "found 'http://u:***@h:1/x'")
    assert _err({"heron_py.checkpoint.storage": "localfs", "topology.state.provider": STORM_REDIS_PROVIDER}) == (
        "config topology.state.provider: expected a provider that agrees with heron_py.checkpoint.storage=localfs, "
        "found 'org.apache.storm.redis.state.RedisKeyValueStateProvider' (storage redis)")


def test_the_factory_and_the_kube_rule_follow_the_storage(tmp_path: Path) -> None:
    pytest.importorskip("redis")
    redis_cfg = {**EO, "heron_py.checkpoint.storage": "redis",
                 "heron_py.checkpoint.redis.url": "redis://:pw@127.0.0.1:6390/1"}
    redis_stateful, local_stateful = StatefulConfig.from_config(redis_cfg), StatefulConfig.from_config(EO)
    s = open_checkpoint_storage(redis_stateful, tmp_path, secret=SECRET)
    assert isinstance(s, RedisCheckpointStorage) and s.where == "redis://:***@127.0.0.1:6390/1"
    assert checkpoint_location(redis_stateful, tmp_path) == "redis redis://:***@127.0.0.1:6390/1"
    assert redis_stateful.storage == "redis"
    local = open_checkpoint_storage(local_stateful, tmp_path, root=tmp_path / "given")
    assert isinstance(local, LocalFsStorage) and local.root == tmp_path / "given"
    assert checkpoint_location(local_stateful, tmp_path) == str(tmp_path / "checkpoints")
    assert local_stateful.storage == "localfs"
    # on Kubernetes checkpoints in Redis need no shared volume; files still do
    assert checkpoint_root_problem("wc", redis_cfg) is None
    assert checkpoint_root_problem("wc", {**EO, "topology.state.provider": STORM_REDIS_PROVIDER}) is None
    assert checkpoint_root_problem("wc", EO) is not None
    assert not (tmp_path / "checkpoints").exists()  # opening a store writes nothing


def test_the_marker_lists_the_tasks_the_master_counted_not_the_hash_fields(store: RedisCheckpointStorage) -> None:
    store.save("wc", 4, 1, b"state of task 1")
    store.save("wc", 4, 9, b"a stray field")
    store.mark_complete("wc", 4, [1], {"count": (1,), "sink": (2, 3)})
    assert store.load("wc", 4, 1) == b"state of task 1"
    assert store.load("wc", 4, 9) is None
    assert store.marker("wc", 4) == Marker(frozenset({1}), {"count": (1,), "sink": (2, 3)})
    store.mark_complete("wc", 5, [], {"sink": (2, 3)})  # stateless tasks only: listed by its marker
    assert store.completed_ids("wc") == [4, 5] and store.load("wc", 5, 2) is None


def test_a_fresh_store_whose_first_write_is_a_marker_marks_it(server: RedisServer) -> None:
    """The master's store writes no state: its first durable write is a marker (two commands,
    then WAITAOF), whose fsync reply must be read after both, not after the first."""
    tasks = RedisCheckpointStorage(server.url)
    tasks.save("fresh", 1, 0, b"state")
    master = RedisCheckpointStorage(server.url)
    master.mark_complete("fresh", 1, [0], {"c": (0,)})
    assert master.completed_ids("fresh") == [1] and master.load("fresh", 1, 0) == b"state"
