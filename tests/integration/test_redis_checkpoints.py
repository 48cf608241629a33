"""Effectively once with the checkpoints in Redis (Storm's RedisKeyValueStateProvider) on real
processes: the stateful word count of tests/integration/test_effectively_once.py on 2
containers, its checkpoints on a real redis-server (password, database 1) named by Storm's
``topology.state.provider`` and ``topology.state.provider.config``, kill -9 of a count task
mid-run. The counts of the newest complete checkpoint that covers the whole input, read from
Redis, equal a plain Python count; the checkpoints are listed in Redis, and nothing is written to
the local checkpoint folder."""

from __future__ import annotations

import json
import os
import pickle
import re
import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import wc_common

from heron_py.checkpoint.redis_storage import RedisCheckpointStorage
from heron_py.checkpoint.storage import IncompleteCheckpointError
from heron_py.common.config import STORM_REDIS_PROVIDER
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES
from tests.integration.test_effectively_once import (
    _checkpoints_done,
    _instance_pid,
    _logs,
    _names_the_task,
    _restored_after_failure,
    _tasks,
)
from tests.redis_server import RedisServer, redis_or_skip
from tests.support import run_cli, wait_for

pytestmark = pytest.mark.integration

N = 24000  # sentences: 12,000 per spout task, ~6 s at RATE
RATE = 2000
PASSWORD = "ckpt-pw"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RedisServer]:
    srv = redis_or_skip(tmp_path / "redis", password=PASSWORD)
    yield srv
    srv.stop()


def _final_counts(store: RedisCheckpointStorage, name: str) -> tuple[int, Counter[str]] | None:
    """(checkpoint id, summed counts) of the newest complete checkpoint covering the whole input."""
    tasks = _tasks(name)
    shares = {t: len(range(i, N, len(tasks["sentence"]))) for i, t in enumerate(sorted(tasks["sentence"]))}
    for cid in reversed(store.completed_ids(name)):
        try:
            positions = {t: pickle.loads(store.load(name, cid, t) or pickle.dumps({})).get("pos") for t in shares}
            if positions != shares:
                continue
            counts: Counter[str] = Counter()
            for t in tasks["count"]:
                counts.update(pickle.loads(store.load(name, cid, t) or pickle.dumps({})))
        except IncompleteCheckpointError:
            continue  # the master's gc removed it after completed_ids listed it
        return cid, counts
    return None


def test_kill_9_of_a_count_task_exact_with_checkpoints_in_redis(heron_home: Path, server: RedisServer) -> None:
    name = "eo_redis"
    pool = {"jedisPoolConfig": {"host": "127.0.0.1", "port": server.port, "timeout": 2000, "database": 1,
                                "password": PASSWORD}}
    store = RedisCheckpointStorage(f"redis://:{PASSWORD}@127.0.0.1:{server.port}/1")  # checksums only: a tool
    try:
        run_local(EXAMPLES / "stateful_word_count.py",
                  ["--sentences", str(N), "--interval", "1", "--rate", str(RATE)], home=heron_home, name=name,
                  keep_running=True, properties={"topology.state.provider": STORM_REDIS_PROVIDER,
                                                 "topology.state.provider.config": json.dumps(pool)})
        task, pid = _instance_pid(name, "count")
        wait_for(lambda: _checkpoints_done(heron_home, name) >= 2, 60, "two checkpoints")
        assert _final_counts(store, name) is None, "the input was done before the kill: the test proves nothing"
        os.kill(pid, signal.SIGKILL)
        assert _names_the_task(_restored_after_failure(heron_home, name), task, pid)
        def final() -> tuple[int, Counter[str], list[int]] | None:
            # the completed ids read right after the counts: with a checkpoint a second, the
            # retention can drop that checkpoint by a later look on a loaded machine
            got = _final_counts(store, name)
            return None if got is None else (got[0], got[1], store.completed_ids(name))

        cid, counts, completed = wait_for(final, 90, "a complete checkpoint covering the input")
        assert counts == wc_common.expected_counts(N) and sum(counts.values()) == 10 * N
        assert cid in completed and len(store.checkpoint_ids(name)) >= 2
        # the restarted task restored a non-empty state, from Redis
        log = _logs(heron_home, name, f"container-*/count-{task}.log")
        restored = [int(n) for n in re.findall(r"count restored with (\d+) words", log)]
        assert len(restored) >= 2 and restored[-1] > 0, restored
        master = _logs(heron_home, name, "container-0/tmanager*.log")
        assert f"kept in redis redis://:***@127.0.0.1:{server.port}/1" in master
        assert PASSWORD not in _logs(heron_home, name, "container-*/*.log")  # logs show *** for it
        # listed through the ids set, in database 1; nothing in the local checkpoint folder
        import redis

        c = redis.Redis(host="127.0.0.1", port=server.port, db=1, password=PASSWORD)
        assert {int(i) for i in c.smembers(f"heron-py:ckpt:{{{name}}}:ids")} == set(store.checkpoint_ids(name))
        assert not (heron_home / "checkpoints").exists()
    finally:
        kill_local(heron_home, name)
        store.close()


def test_submit_refuses_another_state_provider_in_one_line(heron_home: Path) -> None:
    r = run_cli(heron_home, "submit", "local", "--dry-run", "--name", "wc", "--config-property",
                "topology.state.provider=org.apache.storm.hbase.state.HBaseKeyValueStateProvider",
                str(EXAMPLES / "stateful_word_count.py"))
    assert r.returncode == 1 and r.stderr == (
        "heron-py: error: topology 'wc': config topology.state.provider: expected "
        "org.apache.storm.redis.state.RedisKeyValueStateProvider or org.apache.storm.state."
        "InMemoryKeyValueStateProvider (heron-py keeps state in Redis or in files), found "
        "'org.apache.storm.hbase.state.HBaseKeyValueStateProvider'\n")
