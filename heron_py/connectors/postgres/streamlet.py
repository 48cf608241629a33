"""PostgreSQL for the Streamlet API: ``streamlet.to_sink(PostgresSink(url, "table"))``.

Each element is a row: a dict (column → value) or a tuple/list in the order of ``columns``. The
sink inserts it (``on_conflict`` "nothing" or "update" with ``conflict_columns``, as the insert
bolt) and returns only after the COMMIT, so an element is acked after its row is durable. A row
the table refuses (a violated constraint, a bad value) raises: it is the task's error, as any
sink's. While the server is unreachable the sink retries with backoff (one error line every
10 s), holding the stream back (backpressure)."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from heron_py.api.streamlet.context import Context
from heron_py.api.streamlet.sink import Sink
from heron_py.connectors.base import RetryPolicy
from heron_py.connectors.common import LogThrottle, Reconnect
from heron_py.connectors.postgres.bolts import insert_sql
from heron_py.connectors.postgres.config import server_config
from heron_py.connectors.postgres.errors import ErrorKind, classify, describe
from heron_py.connectors.postgres.mappers import db_value


class PostgresSink(Sink):
    def __init__(self, url: str, table: str, columns: Sequence[str] | None = None, on_conflict: str = "error",
                 conflict_columns: Sequence[str] = ()) -> None:
        self.url, self.table, self.columns = url, table, tuple(columns) if columns else None
        self.on_conflict, self.conflict_columns = on_conflict, tuple(conflict_columns)

    def setup(self, context: Context) -> None:
        self.where = f"postgres sink task {context.get_task_id()}"
        self.server = server_config({"postgres.url": self.url}, self.where)
        self.connection: Any = None
        self.conn = Reconnect(RetryPolicy(initial_s=0.1, max_delay_s=5.0))
        self.throttle = LogThrottle(time.monotonic)
        self.errors = 0

    def _row(self, element: Any) -> tuple[tuple[str, ...], list[Any]]:
        if isinstance(element, dict):
            names = tuple(str(k) for k in element)
            return names, [db_value(v) for v in element.values()]
        if self.columns is None or not isinstance(element, (tuple, list)) or len(element) != len(self.columns):
            raise ValueError(f"{self.where}: element {element!r}: expected a dict of columns or a sequence of "
                             f"{len(self.columns or ())} values for columns {list(self.columns or ())}")
        return self.columns, [db_value(v) for v in element]

    def put(self, element: Any) -> None:
        names, values = self._row(element)
        q = insert_sql(self.table, names, self.on_conflict, self.conflict_columns)
        while True:
            try:
                if self.connection is None:
                    self.connection = self.server.connect()
                with self.connection.transaction():
                    self.connection.execute(q, values)
                if self.conn.ok():
                    self.logger.info(f"{self.where}: postgresql server {self.server.address()} reachable again")
                return
            except Exception as e:
                kind = classify(e)
                if kind in (ErrorKind.ROW, ErrorKind.OTHER):
                    raise  # the row itself (or the query) is wrong: the task's error, as any sink's
                if self.connection is not None and (self.connection.closed or self.connection.broken):
                    self.connection = None
                self.errors += 1
                delay = self.conn.failed(time.monotonic())
                line = describe(e, self.where, self.server.address(), self.server.user, 5.0, table=self.table)
                if self.throttle.should_log(line):
                    self.logger.warning(line)
                time.sleep(delay)

    @property
    def logger(self) -> logging.Logger:
        return logging.getLogger(f"heron_py.streamlet.{type(self).__name__}")

    def cleanup(self) -> None:
        if self.connection is not None:
            self.connection.close()
