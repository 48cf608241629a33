"""heron_py.common.redis_client against a real redis-server: every client heron-py opens speaks
RESP2 and retries nothing itself, whatever redis-py major is installed (redis-py 8 made RESP3
and retries its defaults)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from heron_py.checkpoint.redis_storage import RedisCheckpointStorage
from heron_py.common.redis_client import redis_client
from heron_py.connectors.redis.config import server_config
from tests.redis_server import redis_or_skip


def test_every_client_speaks_resp2(tmp_path: Path) -> None:
    srv = redis_or_skip(tmp_path / "r")
    try:
        clients = [redis_client(2.0, srv.url),
                   server_config({"redis.url": srv.url}, "w").client(),
                   server_config({"redis.port": srv.port}, "w").client(),
                   RedisCheckpointStorage(srv.url).client]
        for c in clients:
            assert c.client_info()["resp"] == "2"
            c.close()
    finally:
        srv.stop()


def test_a_failed_call_is_tried_once() -> None:
    """A 'server' that accepts each connection and closes it at once: one call, one connection.
    redis-py's own default (3 retries since 6.0) would connect four times."""
    pytest.importorskip("redis")
    import redis.exceptions as rx

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        accepted = 0
        stop = threading.Event()

        def serve() -> None:
            nonlocal accepted
            listener.settimeout(0.05)
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                accepted += 1
                conn.close()

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        c = redis_client(2.0, host="127.0.0.1", port=listener.getsockname()[1])
        with pytest.raises(rx.ConnectionError):
            c.ping()
        time.sleep(0.2)  # a retry, if any, would have connected again by now
        stop.set()
        t.join(5)
    assert accepted == 1
