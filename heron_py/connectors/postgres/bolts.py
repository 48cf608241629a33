"""PostgresInsertBolt (storm-jdbc's JdbcInsertBolt) and PostgresLookupBolt (JdbcLookupBolt).

The insert bolt batches its inputs (``postgres.batch.size``, ``postgres.batch.delay.ms``; the
base's ``AckedSink``) and writes a batch in one transaction (executemany, pipelined): its inputs
are acked only after the COMMIT. When the batch fails:
- because of a row (SQLSTATE class 22 or 23: a value the column refuses, a violated constraint),
  the batch is written again row by row in one transaction, each row under a savepoint, so the
  bad rows are isolated: the others are committed and acked, each bad row's input is failed and
  logged once (with its id: ``postgres.input.id.fields``, else the tuple id) and the topology
  goes on;
- for any other reason (the server unreachable, wrong credentials, a missing table, a query over
  ``postgres.query.timeout.secs``) every input of the batch is failed (the spout replays them),
  the error is one line in the log (at most every 10 s), counted in the metric
  ``connection-errors``, and the bolt waits with exponential backoff before it writes again.

The row is the mapper's (``postgres.mapper``, default ``SimpleJdbcMapper``: the columns
``postgres.columns``, or the table's columns the input has). ``postgres.on.conflict`` makes the
insert an upsert: ``nothing`` (ON CONFLICT DO NOTHING) or ``update`` (ON CONFLICT
(postgres.conflict.columns) DO UPDATE SET the other columns); ``postgres.insert.query`` is a
query of yours with %s placeholders for ``postgres.columns``.

The lookup bolt runs ``postgres.select.query`` per input with the input fields
``postgres.query.fields`` as parameters, emits one tuple per result row (the mapper's
``to_tuple``: ``postgres.output.fields`` from the input or the row), anchored to the input, then
acks it; a query error fails the input.

Under EFFECTIVELY_ONCE the insert bolt writes each input exactly once (heron_py/connectors/
committing.py): inputs are staged in the task's checkpointed state and a checkpoint's batch is
written when the master says the checkpoint is complete, in one transaction with the task's row
in ``postgres.progress.table`` (default heron_py_sink_progress: sink, task, checkpoint), which
a batch at or below it skips; a failed write is retried with backoff, never dropped."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.common.config import effectively_once
from heron_py.connectors.base import BatchPolicy
from heron_py.connectors.committing import CommittingSink, StagedInput
from heron_py.connectors.common import LogThrottle, Reconnect, TupleFields, component_where, config_error
from heron_py.connectors.postgres.config import (
    InsertConfig,
    LookupConfig,
    insert_config,
    lookup_config,
)
from heron_py.connectors.postgres.errors import ErrorKind, classify, describe, first_line, is_db_error, sqlstate
from heron_py.connectors.postgres.mappers import SimpleJdbcLookupMapper, SimpleJdbcMapper
from heron_py.connectors.sink import CountsMetric, SinkLoop, bad_input_line

Row = tuple[tuple[str, ...], tuple[Any, ...]]  # (column names, values)


def insert_sql(table: str, columns: tuple[str, ...], on_conflict: str, keys: tuple[str, ...]) -> Any:
    """INSERT INTO table (columns) VALUES (%s, ...) [ON CONFLICT ...], identifiers quoted."""
    from psycopg import sql

    ident = sql.Identifier(*table.split("."))
    q = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        ident, sql.SQL(", ").join(map(sql.Identifier, columns)), sql.SQL(", ").join(sql.Placeholder() * len(columns)))
    if on_conflict == "nothing":
        q += sql.SQL(" ON CONFLICT DO NOTHING")
    elif on_conflict == "update":
        rest = [c for c in columns if c not in keys]
        target = sql.SQL(", ").join(map(sql.Identifier, keys))
        if rest:
            q += sql.SQL(" ON CONFLICT ({}) DO UPDATE SET {}").format(target, sql.SQL(", ").join(
                sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c)) for c in rest))
        else:
            q += sql.SQL(" ON CONFLICT ({}) DO NOTHING").format(target)
    return q


def copy_sql(table: str, columns: tuple[str, ...]) -> Any:
    """COPY table (columns) FROM STDIN, identifiers quoted."""
    from psycopg import sql

    return sql.SQL("COPY {} ({}) FROM STDIN").format(sql.Identifier(*table.split(".")),
                                                     sql.SQL(", ").join(map(sql.Identifier, columns)))


def ensure_progress_table(connection: Any, table: str) -> None:
    """Effectively once: each task's newest committed checkpoint per sink, made at the first
    commit (the sink's user needs CREATE on the schema once, or an operator makes it)."""
    from psycopg import sql

    with connection.transaction():
        connection.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (sink text NOT NULL, task integer NOT NULL, checkpoint bigint NOT NULL, "
            "PRIMARY KEY (sink, task))").format(sql.Identifier(*table.split("."))))


def _mapper(config: dict[str, Any], where: str, default: Any, need: tuple[str, ...]) -> Any:
    m = config.get("postgres.mapper")
    if m is None:
        return default
    if not all(callable(getattr(m, n, None)) for n in need):
        raise config_error(where, "postgres.mapper", f"a mapper object with {', '.join(need)}", m)
    return m


class _PostgresBolt(Bolt):
    # staged writes are committed by the task that staged them: split over another parallelism,
    # a batch would be committed twice or never (heron_py/runtime/rescale.py)
    heron_state_rescale = "refuse"
    clock: Callable[[], float] = time.monotonic
    kind = "postgres bolt"
    where: str
    address: str
    server_user: str
    reconnect_max_s: float
    conn: Reconnect

    def _common(self, context: Any, id_fields: tuple[str, ...] | None) -> None:
        self.context = context
        self.fields = TupleFields(context)
        self.id_fields = id_fields
        self.connection: Any = None
        self.throttle = LogThrottle(self.clock)
        # a bad row is logged once (its replays fail again with the same line)
        self.bad_lines = LogThrottle(self.clock, period_s=3600.0)
        self.counts = {"written": 0, "failed": 0, "connection-errors": 0, "bad-inputs": 0, "batches": 0,
                       "row-by-row": 0}
        context.register_metric("postgres", CountsMetric(self.counts), 10)

    def input_id(self, tup: Any) -> str:
        if self.id_fields:
            have = self.fields.as_dict(tup)
            return "/".join(str(have.get(f)) for f in self.id_fields)
        return str(tup.id)

    def _bad(self, tup: Any, why: str) -> None:
        self.counts["bad-inputs"] += 1
        line = bad_input_line(self.where, self.input_id(tup), tup, why)
        if self.bad_lines.should_log(line):
            self.log(line, "error")
        if not isinstance(tup, StagedInput):  # a staged input's tuple was done with at its checkpoint
            self.fail(tup)

    def _drop(self) -> None:
        old, self.connection = self.connection, None
        if old is not None:
            try:
                old.close()
            except Exception:  # already broken
                pass

    def _on_error(self, e: Exception, now: float, table: str | None) -> None:
        if not is_db_error(e):
            raise e
        if self.connection is not None and (self.connection.closed or self.connection.broken):
            self._drop()
        self.conn.failed(now)
        self.counts["connection-errors"] += 1
        line = describe(e, self.where, self.address, self.server_user, self.reconnect_max_s, table=table)
        if self.throttle.should_log(line):
            kind = classify(e)
            self.log(line, "warn" if kind in (ErrorKind.UNREACHABLE, ErrorKind.TIMEOUT) else "error")

    def cleanup(self) -> None:
        self._drop()


class PostgresInsertBolt(CommittingSink, _PostgresBolt):
    outputs: list[Any] = []
    heron_poll_interval_s = 0.005  # the runner calls heron_poll: a batch's delay is kept while idle
    kind = "postgres insert bolt"

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.where = component_where(self.kind, context)
        self.cfg: InsertConfig = insert_config(config, self.where)
        self._common(context, self.cfg.id_fields)
        self.address, self.server_user = self.cfg.server.address(), self.cfg.server.user
        self.reconnect_max_s = self.cfg.reconnect.max_delay_s
        self.mapper = _mapper(config, self.where, SimpleJdbcMapper(self.cfg.columns), ("get_columns",))
        self.mapper.fields_of = self.fields
        self.table_columns: tuple[str, ...] | None = None
        self.queries: dict[tuple[str, ...], Any] = {}
        # a plain insert into a table goes as one COPY per batch: a third of executemany's time
        # per row, client and server (profiled); an upsert or a query of yours stays an INSERT
        self.use_copy = self.cfg.copy and self.cfg.insert_query is None and self.cfg.on_conflict == "error" \
            and self.cfg.table is not None
        self.copies: dict[tuple[str, ...], Any] = {}
        self.conn = Reconnect(self.cfg.reconnect)
        self.rows: list[tuple[Any, Row]] = []  # the batch being written: its inputs the mapper could map
        self.loop: SinkLoop[tuple[Any, Row | None], list[tuple[Any, Row]]] = SinkLoop(
            BatchPolicy(self.cfg.batch, self.cfg.batch_delay_s), self.conn, self.clock, self._write, self._confirmed,
            self._failed, self._recovered)
        self.exact = effectively_once(config)
        self._commit_row_by_row = False  # the last commit failed on a row: the next isolates it
        self.sink_id = f"{context.get_topology_name()}/{context.get_component_id()}"
        self.counts.update({"committed-checkpoints": 0, "skipped-checkpoints": 0})
        self.start_commits(self._commit, self._commit_failed)

    def _commit(self, checkpoint_id: int, items: list[StagedInput]) -> None:
        """One checkpoint's batch and the task's progress in one transaction; nothing when the
        progress shows it written (a replay after a restore, a second notification)."""
        from psycopg import sql

        if self.connection is None:
            self._connect()
            ensure_progress_table(self.connection, self.cfg.progress_table)
        rows = self._rows([(item, None) for item in items])
        table = sql.Identifier(*self.cfg.progress_table.split("."))
        task = self.context.get_task_id()
        with self.connection.transaction():
            cur = self.connection.cursor()
            # one writer per (sink, task) at a time, even a task's zombie of a rolled-back run
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s), %s)", (self.sink_id, task))
            done = cur.execute(sql.SQL("SELECT checkpoint FROM {} WHERE sink = %s AND task = %s").format(table),
                               (self.sink_id, task)).fetchone()
            if done is not None and done[0] >= checkpoint_id:
                self.counts["skipped-checkpoints"] += 1
                return
            self._insert(cur, rows)
            cur.execute(sql.SQL("INSERT INTO {} (sink, task, checkpoint) VALUES (%s, %s, %s) ON CONFLICT (sink, task) "
                                "DO UPDATE SET checkpoint = EXCLUDED.checkpoint").format(table),
                        (self.sink_id, task, checkpoint_id))
        self.counts["committed-checkpoints"] += 1
        self.counts["written"] += len(rows)
        self.counts["batches"] += 1
        if self.conn.ok():
            self._recovered()

    def _commit_failed(self, checkpoint_id: int, e: Exception) -> None:
        """Kept staged and retried after the backoff: a batch of a complete checkpoint is never
        dropped. A row the table refuses is isolated instead, so one bad row cannot stop the
        sink for good: it is logged, counted and left out, and the rest is written."""
        now = self.clock()
        if self.connection is not None and not self.connection.broken and classify(e) is ErrorKind.ROW:
            self._commit_row_by_row = True
        self._on_error(e, now, self.cfg.table)

    def _connect(self) -> None:
        self.connection = self.cfg.server.connect()
        if self.cfg.table is not None:
            # the table's columns: a missing table is one clear line now, and SimpleJdbcMapper
            # without columns takes them from here (storm-jdbc reads the table's metadata too)
            schema, _, name = self.cfg.table.rpartition(".")
            with self.connection.transaction():
                rows = self.connection.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                    "AND table_schema = COALESCE(NULLIF(%s, ''), current_schema()) ORDER BY ordinal_position",
                    (name, schema)).fetchall()
            if not rows:
                import psycopg.errors as pe

                raise pe.UndefinedTable(f'relation "{self.cfg.table}" does not exist')
            self.table_columns = tuple(r[0] for r in rows)

    def _query(self, names: tuple[str, ...]) -> Any:
        q = self.queries.get(names)
        if q is None:
            if self.cfg.insert_query is not None:
                q = self.cfg.insert_query
            else:
                q = insert_sql(self.cfg.table or "", names, self.cfg.on_conflict, self.cfg.conflict_keys)
            self.queries[names] = q
        return q

    def process(self, tup: Any) -> None:
        # the row is made when the batch is written: SimpleJdbcMapper without columns needs the
        # table's columns, known once connected
        if self.exact:
            self.committer.commits.add(StagedInput.of(tup))
            return
        self.loop.add((tup, None))

    def heron_poll(self) -> None:
        if self.exact:
            self.commit_due()
            return
        self.loop.poll()

    def heron_busy(self) -> bool:
        """Inputs are batched, not yet written (an in-process run keeps polling until written)."""
        return self.committer.due if self.exact else self.loop.busy()

    def cleanup(self) -> None:
        # a graceful stop writes what is buffered, as the Redis and RabbitMQ sinks do (before,
        # the batch waiting for its delay was dropped: replayed at least once, lost at most once);
        # under effectively once nothing is written that no complete checkpoint holds
        try:
            if not self.exact:
                self.loop.drain()
        finally:
            self._drop()

    def _rows(self, batch: list[tuple[Any, Row | None]]) -> list[tuple[Any, Row]]:
        """Each input's row; an input the mapper cannot map is failed here."""
        out: list[tuple[Any, Row]] = []
        for tup, _ in batch:
            if isinstance(self.mapper, SimpleJdbcMapper) and self.mapper.columns is None and self.table_columns:
                self.mapper.resolve(self.table_columns, self.fields.names(tup))
            try:
                cols = self.mapper.get_columns(tup)
                if not cols:
                    raise ValueError(f"expected fields named as columns of table '{self.cfg.table}' "
                                     f"{list(self.table_columns or ())}, found {list(self.fields.names(tup))}")
            except (ValueError, TypeError) as e:
                self._bad(tup, str(e))
                continue
            out.append((tup, (tuple(c for c, _ in cols), tuple(v for _, v in cols))))
        return out

    def _write(self, batch: list[tuple[Any, Row | None]]) -> list[tuple[Any, Row]]:
        self.rows = []
        if self.connection is None:
            self._connect()
        self.rows = rows = self._rows(batch)
        with self.connection.transaction():
            self._insert(self.connection.cursor(), rows)
        return rows

    def _insert(self, cur: Any, rows: list[tuple[Any, Row]]) -> None:
        """The rows, in the caller's transaction. After a batch of a checkpoint failed on a row,
        each row goes under its own savepoint, and a row the table refuses is left out (logged,
        counted): written again, it would be refused again."""
        if self.exact and self._commit_row_by_row:
            self._commit_row_by_row = False
            for tup, (names, values) in rows:
                try:
                    with self.connection.transaction():  # a savepoint
                        cur.execute(self._query(names), values)
                except Exception as row_error:
                    if classify(row_error) is not ErrorKind.ROW:
                        raise
                    by = f" by table '{self.cfg.table}'" if self.cfg.table else ""
                    self._bad(tup, f"row refused{by} ({sqlstate(row_error)} {type(row_error).__name__}: "
                                   f"{first_line(row_error)})")
            return
        i = 0
        while i < len(rows):  # consecutive rows of the same columns: one executemany
            names = rows[i][1][0]
            j = i
            while j < len(rows) and rows[j][1][0] == names:
                j += 1
            if self.use_copy:
                q = self.copies.get(names)
                if q is None:
                    q = self.copies[names] = copy_sql(self.cfg.table or "", names)
                with cur.copy(q) as cp:
                    write_row = cp.write_row
                    for k in range(i, j):
                        write_row(rows[k][1][1])
            else:
                cur.executemany(self._query(names), [r[1][1] for r in rows[i:j]])
            i = j

    def _confirmed(self, _batch: list[tuple[Any, Row | None]], rows: list[tuple[Any, Row]]) -> None:
        self.counts["batches"] += 1
        for tup, _row in rows:
            self.counts["written"] += 1
            self.ack(tup)

    def _failed(self, batch: list[tuple[Any, Row | None]], e: Exception, now: float) -> None:
        rows, self.rows = self.rows, []
        if classify(e) is ErrorKind.ROW and self.connection is not None and not self.connection.broken:
            self._row_by_row(rows, now)
            return
        for tup, _row in rows or batch:
            self.counts["failed"] += 1
            self.fail(tup)  # the spout replays it
        self._on_error(e, now, self.cfg.table)

    def _recovered(self) -> None:
        self.log(f"{self.where}: postgresql server {self.address} reachable again")

    def _row_by_row(self, rows: list[tuple[Any, Row]], now: float) -> None:
        """A row broke the batch: each row again under its own savepoint, in one transaction."""
        self.counts["row-by-row"] += 1
        bad: list[tuple[Any, Exception]] = []
        good: list[Any] = []
        try:
            with self.connection.transaction():
                cur = self.connection.cursor()
                for tup, (names, values) in rows:
                    try:
                        with self.connection.transaction():  # a savepoint
                            cur.execute(self._query(names), values)
                        good.append(tup)
                    except Exception as row_error:
                        if classify(row_error) is not ErrorKind.ROW:
                            raise
                        bad.append((tup, row_error))
        except Exception as e:
            for tup, _row in rows:
                self.counts["failed"] += 1
                self.fail(tup)
            self._on_error(e, now, self.cfg.table)
            return
        for tup in good:
            self.counts["written"] += 1
            self.ack(tup)
        for tup, err in bad:
            by = f" by table '{self.cfg.table}'" if self.cfg.table else ""
            self._bad(tup, f"row refused{by} ({sqlstate(err)} {type(err).__name__}: {first_line(err)})")


class PostgresLookupBolt(_PostgresBolt):
    kind = "postgres lookup bolt"

    @classmethod
    def spec(cls, name: str | None = None, inputs: Any = None, par: int = 1, config: dict[str, Any] | None = None,
             optional_outputs: list[Any] | None = None) -> Any:
        """The outputs are ``postgres.output.fields`` (or the mapper's declare_output_fields())."""
        from heron_py.api.component.component_spec import HeronComponentSpec

        conf = dict(config or {})
        where = f"postgres lookup bolt '{name}'"
        mapper = conf.get("postgres.mapper")
        outputs = list(mapper.declare_output_fields()) if mapper is not None and hasattr(
            mapper, "declare_output_fields") else list(lookup_config(conf, where).output_fields)
        return HeronComponentSpec(name, cls, False, par, inputs=inputs,
                                  outputs=[*outputs, *list(optional_outputs or [])], config=conf)

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self.where = component_where(self.kind, context)
        self.cfg: LookupConfig = lookup_config(config, self.where)
        self._common(context, self.cfg.id_fields)
        self.address, self.server_user = self.cfg.server.address(), self.cfg.server.user
        self.reconnect_max_s = self.cfg.reconnect.max_delay_s
        self.mapper = _mapper(config, self.where,
                              SimpleJdbcLookupMapper(self.cfg.output_fields, self.cfg.query_fields),
                              ("get_columns", "to_tuple"))
        self.mapper.fields_of = self.fields
        self.conn = Reconnect(self.cfg.reconnect)
        # effectively once has no replay of a failed input: one the server could not answer
        # waits here, in order, and is answered after the backoff (before the next barrier)
        self.exact = effectively_once(config)
        self.waiting: list[Any] = []

    heron_poll_interval_s = 0.01

    # --- effectively once (the engine calls these only then) ---
    def init_state(self, state: Any) -> None:
        pass  # nothing of its own to restore: the engine calls pre_save of a component with both

    def pre_save(self, checkpoint_id: Any) -> None:
        """The inputs from before the barrier are answered (their tuples emitted) before it
        passes; if the server cannot answer them now the checkpoint fails and they stay."""
        self.conn.next_try = 0.0
        self._answer_waiting()
        if self.waiting:
            raise RuntimeError(f"{self.where}: postgresql server {self.address} did not answer the "
                               f"{len(self.waiting)} inputs that came before checkpoint {checkpoint_id}; they are "
                               f"kept for the next checkpoint")

    def heron_poll(self) -> None:
        if self.waiting and self.conn.ready(self.clock()):
            self._answer_waiting()

    def heron_busy(self) -> bool:
        return bool(self.waiting)

    def _answer_waiting(self) -> None:
        while self.waiting and self._answer(self.waiting[0]):
            self.waiting.pop(0)

    def process(self, tup: Any) -> None:
        if self.exact and (self.waiting or not self.conn.ready(self.clock())):
            self.waiting.append(tup)
            return
        if not self._answer(tup):
            if self.exact:
                self.waiting.append(tup)
            else:
                self.counts["failed"] += 1
                self.fail(tup)  # the spout replays it later

    def _answer(self, tup: Any) -> bool:
        """Queries for ``tup`` and emits its results: False when the server could not answer
        (the outage is logged and the backoff starts)."""
        now = self.clock()
        if not self.conn.ready(now):
            return False
        try:
            params = [v for _, v in self.mapper.get_columns(tup)]
        except (ValueError, TypeError) as e:
            self._bad(tup, str(e))
            return True
        try:
            if self.connection is None:
                self.connection = self.cfg.server.connect(autocommit=True)
            cur = self.connection.execute(self.cfg.query, params)
            names = [d.name for d in cur.description or ()]
            results = [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
        except Exception as e:
            if classify(e) is ErrorKind.ROW:
                self._bad(tup, f"the query refused its parameters {params!r} ({sqlstate(e)} {type(e).__name__}: "
                               f"{first_line(e)})")
                return True
            self._on_error(e, now, None)
            return False
        try:
            out = [self.mapper.to_tuple(tup, row) for row in results]
        except (ValueError, TypeError) as e:
            self._bad(tup, str(e))
            return True
        for values in out:
            self.emit(values, anchors=[tup])
        self.counts["written"] += 1
        self.ack(tup)
        if self.conn.ok():
            self.log(f"{self.where}: postgresql server {self.address} reachable again")
        return True
