"""The Redis connector tests' server: a real redis-server per test module (a free loopback port,
a private folder; skipped with the reason where the machine has none), and a client that starts
each test from an empty database."""

from __future__ import annotations

import pytest

from tests.redis_server import redis_or_skip


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = redis_or_skip(tmp_path_factory.mktemp("redis"))
    yield s
    s.thaw()  # a test that froze it never leaves it stopped: the stop below would wait for it
    s.stop()


@pytest.fixture
def r(server):
    c = server.client()
    c.flushall()
    return c
