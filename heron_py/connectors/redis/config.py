"""The Redis connectors' options, read once from a component's config dict into frozen
dataclasses; a bad value is one ConnectorConfigError line (what, where, expected, found)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from heron_py.common.redis_client import redis_client
from heron_py.connectors.base import RetryPolicy
from heron_py.connectors.common import config_error, opt_bool, opt_fields, opt_int, opt_str, retry_policy


@dataclass(frozen=True)
class ServerConfig:
    """Where the server is: ``redis.url`` or ``redis.host``/``port``/``db``/``username``/``password``."""

    url: str | None
    host: str
    port: int
    db: int
    username: str | None
    password: str | None
    timeout_s: float

    def address(self) -> str:
        """For messages: never the password."""
        if self.url is not None:
            u = urlsplit(self.url)
            return f"{u.scheme}://{u.hostname}:{u.port or 6379}{u.path or '/0'}"
        return f"redis://{self.host}:{self.port}/{self.db}"

    def client(self) -> Any:
        if self.url is not None:
            return redis_client(self.timeout_s, self.url, decode_responses=False)
        return redis_client(self.timeout_s, host=self.host, port=self.port, db=self.db, username=self.username,
                            password=self.password, decode_responses=False)


def server_config(conf: dict[str, Any], where: str) -> ServerConfig:
    url = opt_str(conf, where, "redis.url", None)
    if url is not None and urlsplit(url).scheme not in ("redis", "rediss", "unix"):
        raise config_error(where, "redis.url", "redis://[user:password@]host:port/db", url)
    return ServerConfig(url=url, host=opt_str(conf, where, "redis.host", "127.0.0.1") or "127.0.0.1",
                        port=opt_int(conf, where, "redis.port", 6379, 1),
                        db=opt_int(conf, where, "redis.db", 0, 0),
                        username=opt_str(conf, where, "redis.username", None),
                        password=None if conf.get("redis.password") in (None, "") else str(conf["redis.password"]),
                        timeout_s=opt_int(conf, where, "redis.timeout.ms", 2000, 1) / 1000.0)


@dataclass(frozen=True)
class StreamSpoutConfig:
    server: ServerConfig
    stream: str
    group: str
    consumer: str
    create_group: bool
    start_id: str
    fields: tuple[str, ...]
    batch: int
    block_ms: int
    claim_idle_ms: int
    claim_period_s: float
    max_pending: int
    retry: RetryPolicy
    reconnect: RetryPolicy
    # at least once: each read's entries one tuple tree (False) or a tree per entry (True)
    ack_per_entry: bool = False


def stream_spout_config(conf: dict[str, Any], where: str, default_group: str,
                        default_consumer: str) -> StreamSpoutConfig:
    stream = opt_str(conf, where, "redis.stream", None)
    if stream is None:
        raise config_error(where, "redis.stream", "the name of a stream", None)
    claim = opt_int(conf, where, "redis.claim.idle.ms", 30_000, 1)
    server = server_config(conf, where)
    block_ms = opt_int(conf, where, "redis.block.ms", 50, 0)
    if block_ms >= server.timeout_s * 1000:
        # a read of an idle stream waits block.ms for the server's answer: past the socket
        # timeout every such read would fail as if the server were unreachable
        raise config_error(where, "redis.block.ms", f"an integer below redis.timeout.ms ({server.timeout_s * 1000:g})",
                           block_ms)
    return StreamSpoutConfig(
        server=server, stream=stream,
        group=opt_str(conf, where, "redis.group", default_group) or default_group,
        consumer=opt_str(conf, where, "redis.consumer", default_consumer) or default_consumer,
        create_group=opt_bool(conf, where, "redis.create.group", False),
        start_id=opt_str(conf, where, "redis.group.start.id", "0") or "0",
        fields=opt_fields(conf, where, "redis.fields", ("value",)),
        batch=opt_int(conf, where, "redis.batch.size", 500, 1),
        block_ms=block_ms,
        claim_idle_ms=claim,
        claim_period_s=opt_int(conf, where, "redis.claim.period.ms", max(100, claim // 2), 1) / 1000.0,
        max_pending=opt_int(conf, where, "redis.max.pending", 100_000, 1),
        retry=retry_policy(conf, where, "redis", initial_ms=100),
        reconnect=RetryPolicy(initial_s=opt_int(conf, where, "redis.reconnect.initial.ms", 100, 0) / 1000.0,
                              max_delay_s=opt_int(conf, where, "redis.reconnect.max.ms", 5000, 0) / 1000.0),
        ack_per_entry=opt_bool(conf, where, "redis.ack.per.entry", False),
    )


@dataclass(frozen=True)
class SinkConfig:
    server: ServerConfig
    batch: int
    batch_delay_s: float
    reconnect: RetryPolicy


def sink_config(conf: dict[str, Any], where: str) -> SinkConfig:
    return SinkConfig(server=server_config(conf, where),
                      batch=opt_int(conf, where, "redis.batch.size", 100, 1),
                      batch_delay_s=opt_int(conf, where, "redis.batch.delay.ms", 5, 0) / 1000.0,
                      reconnect=RetryPolicy(
                          initial_s=opt_int(conf, where, "redis.reconnect.initial.ms", 100, 0) / 1000.0,
                          max_delay_s=opt_int(conf, where, "redis.reconnect.max.ms", 5000, 0) / 1000.0))
