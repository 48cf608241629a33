"""The one way heron-py opens a redis-py client (the Redis connectors and the Redis checkpoint
store): the same protocol, timeouts and retry policy on every redis-py major we accept.

- RESP2, asked for by name: redis-py 8 made RESP3 its default, which needs a server that knows
  HELLO (Redis 6 and later) and hands some replies back in other shapes; the connectors' readers
  and the checkpoint store's scripts were written against RESP2's, which every server speaks.
- No retries inside the client: the caller's own backoff retries, counts and logs each failure,
  and redis-py's default (3 retries with backoff up to 10 s since 6.0) would hold a task's read
  or a checkpoint's save long past redis.timeout.ms.
- One timeout for connecting and for each reply, so a frozen server fails a call, never hangs it.

redis-py is imported here only when a client is made: heron-py installs without it."""

from __future__ import annotations

from typing import Any


def redis_client(timeout_s: float, url: str | None = None, **address: Any) -> Any:
    """A ``redis.Redis`` for ``url`` (``redis://``, ``rediss://``, ``unix://``) or, without one,
    the keyword ``address`` (host, port, db, username, password)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    common: dict[str, Any] = {"socket_timeout": timeout_s, "socket_connect_timeout": timeout_s,
                              "retry": Retry(NoBackoff(), 0), "protocol": 2}
    if url is not None:
        return redis.Redis.from_url(url, **common, **address)
    return redis.Redis(**common, **address)
