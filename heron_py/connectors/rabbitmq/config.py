"""The RabbitMQ connectors' options, read once from a component's config dict into frozen
dataclasses; a bad value is one ConnectorConfigError line (what, where, expected, found)."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

from heron_py.common.config import PENDING, ConfigError
from heron_py.connectors.base import RetryPolicy
from heron_py.connectors.common import config_error, opt_bool, opt_int, opt_str, retry_policy


@dataclass(frozen=True)
class ServerConfig:
    """Where the broker is: ``rabbitmq.url`` (amqp://user:password@host:port/vhost) or
    ``rabbitmq.host``/``port``/``user``/``password``/``vhost``."""

    host: str
    port: int
    user: str
    password: str
    vhost: str
    heartbeat_s: int
    timeout_s: float
    url: str | None = None

    def address(self) -> str:
        """For messages: never the password."""
        return f"amqp://{self.host}:{self.port}/{quote(self.vhost, safe='')}"

    def parameters(self) -> Any:
        import pika

        # one connection attempt: the connector's own backoff retries, counts and logs
        return pika.ConnectionParameters(
            host=self.host, port=self.port, virtual_host=self.vhost,
            credentials=pika.PlainCredentials(self.user, self.password),
            heartbeat=self.heartbeat_s, blocked_connection_timeout=max(self.timeout_s, 30.0),
            socket_timeout=self.timeout_s, stack_timeout=self.timeout_s * 2, connection_attempts=1)

    def connect(self) -> Any:
        import pika

        return pika.BlockingConnection(self.parameters())


def close_connection(connection: Any, graceful: bool) -> None:
    """Closes a pika BlockingConnection, never raising. ``graceful`` is AMQP's closing handshake,
    which waits for the broker's Close-Ok with no timeout of its own: a frozen broker (a hung
    process, a partition with no FIN or RST) holds it until the heartbeat check gives up, up to
    twice ``rabbitmq.heartbeat.secs`` plus 10 s. After an error the handshake buys nothing (the
    broker requeues a lost connection's unacknowledged messages either way), so the socket is
    shut down first: the broker sees the FIN when it runs again, and the close returns at once."""
    if not graceful:
        # pika keeps the socket on its transport; no public accessor (pika 1.x)
        sock = getattr(getattr(getattr(connection, "_impl", None), "_transport", None), "_sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed or reset
                pass
    try:
        if connection.is_open:
            connection.close()
    except Exception:  # already broken (or just shut down): nothing more to close
        pass


def server_config(conf: dict[str, Any], where: str) -> ServerConfig:
    url = opt_str(conf, where, "rabbitmq.url", None)
    heartbeat = opt_int(conf, where, "rabbitmq.heartbeat.secs", 60, 0)
    timeout = opt_int(conf, where, "rabbitmq.timeout.ms", 5000, 1) / 1000.0
    if url is not None:
        u = urlsplit(url)
        try:
            port = u.port
        except ValueError:  # a port that is not a number
            port = -1
        if u.scheme != "amqp" or not u.hostname or port == -1:
            raise config_error(where, "rabbitmq.url", "amqp://user:password@host:port/vhost", url)
        vhost = unquote(u.path[1:]) if len(u.path) > 1 else "/"
        return ServerConfig(host=u.hostname, port=port or 5672, user=unquote(u.username or "guest"),
                            password=unquote(u.password or "guest"), vhost=vhost, heartbeat_s=heartbeat,
                            timeout_s=timeout, url=url)
    return ServerConfig(host=opt_str(conf, where, "rabbitmq.host", "127.0.0.1") or "127.0.0.1",
                        port=opt_int(conf, where, "rabbitmq.port", 5672, 1),
                        user=opt_str(conf, where, "rabbitmq.user", "guest") or "guest",
                        password=str(conf.get("rabbitmq.password", "guest")),
                        vhost=opt_str(conf, where, "rabbitmq.vhost", "/") or "/",
                        heartbeat_s=heartbeat, timeout_s=timeout)


def reconnect_policy(conf: dict[str, Any], where: str) -> RetryPolicy:
    return RetryPolicy(initial_s=opt_int(conf, where, "rabbitmq.reconnect.initial.ms", 100, 0) / 1000.0,
                       max_delay_s=opt_int(conf, where, "rabbitmq.reconnect.max.ms", 5000, 0) / 1000.0)


@dataclass(frozen=True)
class SpoutConfig:
    server: ServerConfig
    queue: str
    declare: bool
    durable: bool
    prefetch: int
    decode: bool
    retry: RetryPolicy
    reconnect: RetryPolicy


def spout_config(conf: dict[str, Any], where: str) -> SpoutConfig:
    queue = opt_str(conf, where, "rabbitmq.queue", None)
    if queue is None:
        raise config_error(where, "rabbitmq.queue", "the name of a queue", None)
    # the broker holds back deliveries past the prefetch: the spout's max pending (Storm's
    # topology.max.spout.pending) is the natural bound, rabbitmq.prefetch overrides it
    try:
        pending = PENDING.parse(conf)  # the engine's key, as the engine reads it
    except ConfigError:
        pending = None  # the engine refuses a bad value with its own line before any task starts
    default_prefetch = int(pending) if pending is not None else 1000
    prefetch = opt_int(conf, where, "rabbitmq.prefetch", default_prefetch, 1)
    if prefetch > 65535:  # basic.qos's prefetch_count is a short
        raise config_error(where, "rabbitmq.prefetch", "an integer from 1 to 65535", prefetch)
    return SpoutConfig(server=server_config(conf, where), queue=queue,
                       declare=opt_bool(conf, where, "rabbitmq.queue.declare", False),
                       durable=opt_bool(conf, where, "rabbitmq.queue.durable", True),
                       prefetch=prefetch,
                       decode=opt_bool(conf, where, "rabbitmq.decode.utf8", True),
                       retry=retry_policy(conf, where, "rabbitmq", initial_ms=100),
                       reconnect=reconnect_policy(conf, where))


@dataclass(frozen=True)
class BoltConfig:
    server: ServerConfig
    exchange: str
    routing_key: str | None
    routing_key_field: str | None
    body_field: str | None
    id_field: str | None
    declare_queue: str | None
    persistent: bool
    mandatory: bool
    batch: int
    batch_delay_s: float
    reconnect: RetryPolicy


def bolt_config(conf: dict[str, Any], where: str) -> BoltConfig:
    exchange = opt_str(conf, where, "rabbitmq.exchange", None) if conf.get("rabbitmq.exchange") != "" else None
    routing_key = conf.get("rabbitmq.routing.key")
    if routing_key is not None and not isinstance(routing_key, str):
        raise config_error(where, "rabbitmq.routing.key", "a string", routing_key)
    rk_field = opt_str(conf, where, "rabbitmq.routing.key.field", None)
    if (routing_key is None) == (rk_field is None):
        raise config_error(where, "rabbitmq.routing.key / rabbitmq.routing.key.field", "exactly one of them",
                           {"rabbitmq.routing.key": routing_key, "rabbitmq.routing.key.field": rk_field})
    declare = opt_bool(conf, where, "rabbitmq.queue.declare", False)
    if declare and (exchange not in (None, "") or routing_key is None):
        raise config_error(where, "rabbitmq.queue.declare", "false unless publishing to the default exchange with "
                                                            "rabbitmq.routing.key (the queue's name)", True)
    return BoltConfig(server=server_config(conf, where), exchange=exchange or "", routing_key=routing_key,
                      routing_key_field=rk_field,
                      body_field=opt_str(conf, where, "rabbitmq.body.field", None),
                      id_field=opt_str(conf, where, "rabbitmq.message.id.field", None),
                      declare_queue=routing_key if declare else None,
                      persistent=opt_bool(conf, where, "rabbitmq.persistent", True),
                      mandatory=opt_bool(conf, where, "rabbitmq.mandatory", True),
                      batch=opt_int(conf, where, "rabbitmq.batch.size", 100, 1),
                      batch_delay_s=opt_int(conf, where, "rabbitmq.batch.delay.ms", 5, 0) / 1000.0,
                      reconnect=reconnect_policy(conf, where))
