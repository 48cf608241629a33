"""The PostgreSQL connectors' options, read once from a component's config dict into frozen
dataclasses; a bad value is one ConnectorConfigError line (what, where, expected, found)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from heron_py.connectors.base import RetryPolicy
from heron_py.connectors.common import config_error, opt_bool, opt_fields, opt_int, opt_str

TCP_TIMEOUT_MS = 30_000
TCP_TIMEOUT_MAX_MS = 2**31 - 1  # libpq parses tcp_user_timeout as an int
ON_CONFLICT = ("error", "nothing", "update")


@dataclass(frozen=True)
class ServerConfig:
    """Where the server is: ``postgres.url`` (postgresql://user:password@host:port/dbname) or
    ``postgres.host``/``port``/``user``/``password``/``dbname``; ``postgres.query.timeout.secs``
    is storm-jdbc's queryTimeoutSecs (the session's statement_timeout; 0: none);
    ``postgres.tcp.timeout.ms`` bounds how long a silent peer (a partition, a host gone: no FIN,
    no RST) holds a call, through libpq's TCP options (0: the OS's TCP defaults)."""

    host: str
    port: int
    user: str
    password: str | None
    dbname: str
    connect_timeout_s: int
    query_timeout_s: int
    tcp_timeout_ms: int = TCP_TIMEOUT_MS

    def address(self) -> str:
        """For messages: never the password."""
        return f"postgresql://{self.host}:{self.port}/{self.dbname}"

    def connect(self, autocommit: bool = False) -> Any:
        import psycopg

        # libpq's keyword parameters: psycopg types them as its catch-all **kwargs
        tcp: dict[str, Any] = dict(self.tcp_options())
        return psycopg.connect(host=self.host, port=self.port, user=self.user, password=self.password,
                               dbname=self.dbname, connect_timeout=self.connect_timeout_s, autocommit=autocommit,
                               options=f"-c statement_timeout={self.query_timeout_s * 1000}",
                               application_name="heron-py", **tcp)

    def tcp_options(self) -> dict[str, int]:
        """libpq's TCP options from ``postgres.tcp.timeout.ms`` (t). Without them a silent peer
        holds a query in flight for the OS's defaults: ~15 min while data is unacknowledged
        (tcp_retries2), ~2 h while waiting for a reply (keepalives off, then idle 7200 s).
        tcp_user_timeout (t ms) ends the first case; keepalives (idle t/3, every t/9, whole
        seconds, at least 1) end the second: Linux drops the connection at the first unanswered
        probe t after the last reply (without tcp_user_timeout, after 3 probes: ~2t/3). A frozen
        server's kernel still ACKs both, so neither fires for it: that wait stays unbounded, as
        documented."""
        t = self.tcp_timeout_ms
        if t == 0:
            return {}
        opts = {"keepalives": 1, "keepalives_idle": max(1, t // 3000), "keepalives_interval": max(1, t // 9000),
                "keepalives_count": 3}
        import psycopg

        if psycopg.pq.version() >= 120000:  # older libpq refuses the unknown option at connect
            opts["tcp_user_timeout"] = t
        return opts


def server_config(conf: dict[str, Any], where: str) -> ServerConfig:
    url = opt_str(conf, where, "postgres.url", None)
    timeout = opt_int(conf, where, "postgres.query.timeout.secs", 30, 0)
    connect_timeout = max(1, opt_int(conf, where, "postgres.connect.timeout.ms", 5000, 1) // 1000)
    tcp_timeout = opt_int(conf, where, "postgres.tcp.timeout.ms", TCP_TIMEOUT_MS, 0)
    if tcp_timeout > TCP_TIMEOUT_MAX_MS:
        raise config_error(where, "postgres.tcp.timeout.ms", f"an integer from 0 to {TCP_TIMEOUT_MAX_MS}",
                           conf.get("postgres.tcp.timeout.ms"))
    if url is not None:
        u = urlsplit(url)
        try:
            port = u.port
        except ValueError:  # a port that is not a number
            port = -1
        if u.scheme not in ("postgresql", "postgres") or not u.hostname or port == -1 or len(u.path) < 2:
            raise config_error(where, "postgres.url", "postgresql://user:password@host:port/dbname", url)
        return ServerConfig(host=u.hostname, port=port or 5432, user=unquote(u.username or "postgres"),
                            password=unquote(u.password) if u.password else None, dbname=unquote(u.path[1:]),
                            connect_timeout_s=connect_timeout, query_timeout_s=timeout, tcp_timeout_ms=tcp_timeout)
    password = conf.get("postgres.password")
    return ServerConfig(host=opt_str(conf, where, "postgres.host", "127.0.0.1") or "127.0.0.1",
                        port=opt_int(conf, where, "postgres.port", 5432, 1),
                        user=opt_str(conf, where, "postgres.user", "postgres") or "postgres",
                        password=None if password in (None, "") else str(password),
                        dbname=opt_str(conf, where, "postgres.dbname", "postgres") or "postgres",
                        connect_timeout_s=connect_timeout, query_timeout_s=timeout, tcp_timeout_ms=tcp_timeout)


def reconnect_policy(conf: dict[str, Any], where: str) -> RetryPolicy:
    return RetryPolicy(initial_s=opt_int(conf, where, "postgres.reconnect.initial.ms", 100, 0) / 1000.0,
                       max_delay_s=opt_int(conf, where, "postgres.reconnect.max.ms", 5000, 0) / 1000.0)


@dataclass(frozen=True)
class InsertConfig:
    server: ServerConfig
    table: str | None
    columns: tuple[str, ...] | None  # None: the table's columns that the input has (SimpleJdbcMapper)
    insert_query: str | None
    on_conflict: str
    conflict_keys: tuple[str, ...]
    id_fields: tuple[str, ...] | None
    batch: int
    batch_delay_s: float
    reconnect: RetryPolicy
    copy: bool = True  # plain inserts of a table as one COPY per batch (no upsert, no query of yours)
    # effectively once: each task's newest committed checkpoint, in the rows' transaction
    progress_table: str = "heron_py_sink_progress"


def insert_config(conf: dict[str, Any], where: str) -> InsertConfig:
    table = opt_str(conf, where, "postgres.table", None)
    query = opt_str(conf, where, "postgres.insert.query", None)
    if (table is None) == (query is None):
        raise config_error(where, "postgres.table / postgres.insert.query", "exactly one of them",
                           {"postgres.table": table, "postgres.insert.query": query})
    columns = opt_fields(conf, where, "postgres.columns", ()) if "postgres.columns" in conf else None
    if query is not None and columns is None:
        raise config_error(where, "postgres.columns", "the input fields of the query's %s placeholders, in order "
                                                      "(postgres.insert.query is set)", None)
    on_conflict = str(conf.get("postgres.on.conflict", "error")).lower()
    if on_conflict not in ON_CONFLICT:
        raise config_error(where, "postgres.on.conflict", f"one of {list(ON_CONFLICT)}",
                           conf.get("postgres.on.conflict"))
    keys = opt_fields(conf, where, "postgres.conflict.columns", ()) if "postgres.conflict.columns" in conf else ()
    if on_conflict == "update" and not keys:
        raise config_error(where, "postgres.conflict.columns", "the columns of a unique key (postgres.on.conflict "
                                                               "is update)", None)
    return InsertConfig(server=server_config(conf, where), table=table, columns=columns, insert_query=query,
                        on_conflict=on_conflict, conflict_keys=keys,
                        id_fields=opt_fields(conf, where, "postgres.input.id.fields", ())
                        if "postgres.input.id.fields" in conf else None,
                        batch=opt_int(conf, where, "postgres.batch.size", 100, 1),
                        batch_delay_s=opt_int(conf, where, "postgres.batch.delay.ms", 10, 0) / 1000.0,
                        reconnect=reconnect_policy(conf, where),
                        copy=opt_bool(conf, where, "postgres.copy", True),
                        progress_table=opt_str(conf, where, "postgres.progress.table", None)
                        or "heron_py_sink_progress")


@dataclass(frozen=True)
class LookupConfig:
    server: ServerConfig
    query: str
    query_fields: tuple[str, ...]
    output_fields: tuple[str, ...]
    id_fields: tuple[str, ...] | None
    reconnect: RetryPolicy


def lookup_config(conf: dict[str, Any], where: str) -> LookupConfig:
    query = opt_str(conf, where, "postgres.select.query", None)
    if query is None:
        raise config_error(where, "postgres.select.query", "a SELECT with %s placeholders", None)
    return LookupConfig(server=server_config(conf, where), query=query,
                        query_fields=opt_fields(conf, where, "postgres.query.fields", ())
                        if "postgres.query.fields" in conf else (),
                        output_fields=opt_fields(conf, where, "postgres.output.fields", ()),
                        id_fields=opt_fields(conf, where, "postgres.input.id.fields", ())
                        if "postgres.input.id.fields" in conf else None,
                        reconnect=reconnect_policy(conf, where))
