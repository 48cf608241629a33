"""The checkpoint tests' real redis-server (Debian's package), one per test module; skipped with
the reason where it is missing."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.redis_server import RedisServer, redis_or_skip


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    srv = redis_or_skip(tmp_path_factory.mktemp("redis"))
    yield srv
    srv.stop()
