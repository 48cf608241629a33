"""A bolt that writes the tuples it receives as Parquet files Spark can read.

    builder.add_bolt("sink", ParquetSink, par=2, inputs={count: Grouping.SHUFFLE},
                     config={"heron_py.sink.parquet.path": "/data/wc", "topology.tick.tuple.freq.secs": 1})

Columns are the fields the input stream declares (every input must declare the same fields).
Rows are buffered and written when ``heron_py.sink.parquet.rows`` (default 10,000) are
buffered, on every tick tuple, and at cleanup.

Commit on ack (at-least-once safe): a file is written under a hidden temporary name
(``.part-...``, which Spark skips), fsynced, renamed into place, the folder fsynced (so the
name survives a power loss too), and only then are its tuples acked.
A crash before the rename loses no data: the tuples were never acked, so spouts replay them.
A crash after the rename but before the acks reach the spout replays tuples whose rows are
already written; file names never repeat (task id, a random id per process, a sequence
number), so nothing is overwritten, and the replayed rows are exact duplicates, which
``heron-py reconcile`` drops before comparing.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.common.atomic import fsync_dir

PATH_KEY = "heron_py.sink.parquet.path"
ROWS_KEY = "heron_py.sink.parquet.rows"


class ParquetSink(Bolt):
    outputs: list[str] = []

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        raw = config.get(PATH_KEY)
        me = context.get_component_id()
        if not raw:
            raise ValueError(f"ParquetSink '{me}': config {PATH_KEY} is not set; expected the output folder")
        self.folder = Path(str(raw))
        self.folder.mkdir(parents=True, exist_ok=True)
        try:
            self.max_rows = int(config.get(ROWS_KEY, 10_000))
        except (TypeError, ValueError):
            self.max_rows = 0
        if self.max_rows < 1:
            raise ValueError(f"ParquetSink '{me}': config {ROWS_KEY} expected an integer >= 1, "
                             f"found {config.get(ROWS_KEY)!r}")
        fields: set[tuple[str, ...]] = set()
        for src in context.get_this_sources() or {}:
            out = context.topology.component(src.component_name).output(src.id)
            fields.add(tuple(out.fields) if out is not None else ())
        if len(fields) != 1:
            raise ValueError(f"ParquetSink '{me}': its inputs declare different fields {sorted(fields)}; "
                             "expected one set of fields (the Parquet columns)")
        self.fields = list(fields.pop())
        self.prefix = f"part-{context.get_task_id():05d}-{uuid.uuid4().hex[:12]}"
        self.seq = 0
        self.rows: list[Any] = []
        self.tuples: list[Any] = []
        self.written_rows = 0

    def process(self, tup: Any) -> None:
        self.rows.append(tup.values)
        self.tuples.append(tup)
        if len(self.rows) >= self.max_rows:
            self.flush()

    def process_tick(self, tup: Any) -> None:
        self.flush()

    def flush(self) -> None:
        if not self.rows:
            return
        import pyarrow as pa
        import pyarrow.parquet as pq

        columns: list[tuple[Any, ...]] = list(zip(*self.rows, strict=True))
        table = pa.table({f: list(col) for f, col in zip(self.fields, columns, strict=True)})
        name = f"{self.prefix}-{self.seq:06d}.parquet"
        tmp = self.folder / f".{name}.tmp"
        try:
            pq.write_table(table, tmp)
            # an ack promises the rows are durable: the data, then the name, reach the disk first
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.folder / name)
            fsync_dir(self.folder)
        except Exception as e:
            tmp.unlink(missing_ok=True)
            self.log(f"ParquetSink: writing {name} failed ({e}); failing {len(self.tuples)} tuples for replay")
            for t in self.tuples:
                self.fail(t)
            self.rows, self.tuples = [], []
            return
        self.seq += 1
        self.written_rows += len(self.rows)
        for t in self.tuples:
            self.ack(t)
        self.rows, self.tuples = [], []

    def cleanup(self) -> None:
        self.flush()
