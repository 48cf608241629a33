"""What a batch run's ``--output`` holds, and how it is written.

A ``BatchOutput`` is what one bolt emitted on one stream: an RDD of value tuples, the stream's
declared fields, and its first rows (computed already: they tell whether it is empty and what
its types are). ``dataframe()`` makes it a Spark DataFrame (the programmatic API);
``write()`` writes it for the CLI.

Parquet to a local path under a local master is written by the Python workers themselves,
with pyarrow, in Spark's own types: the schema Spark infers from the first rows (its inference
functions, with its defaults), each row checked by Spark's verifier (so a row that does not
fit fails with Spark's message) and converted by Spark's ``toInternal``, then one Parquet file
per partition, in a hidden folder that replaces the output's only when all are written (with
``_SUCCESS``, as Spark's committer writes), so a failed write leaves the earlier output intact.
Why: a CLI run starts a new JVM, and through a DataFrame the write pays Spark SQL's cold start
each time (the session state, the analyzer and planner, code generation, the Parquet writer's
classes): 1.4 s of a 3.8 s run of 1,000 sentences. JSON lines, a cluster master (whose workers
may not share this file system) and a path with a scheme (hdfs://, s3a://) go through Spark's
writers as before.
"""

from __future__ import annotations

import functools
import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heron_py.spark.plan import BatchError

PARQUET, JSON_LINES = "Parquet", "JSON lines"
# rows per Parquet row group a worker writes: bounds a worker's memory for a large output
CHUNK_ROWS = 65_536


@dataclass(frozen=True)
class BatchOutput:
    """One ``--output``: the rows a bolt emitted on a stream (an RDD of tuples) and their fields."""

    name: str
    rows: Any  # RDD[tuple]
    fields: tuple[str, ...]
    head: tuple[tuple[Any, ...], ...]  # the first rows in partition order, at most 100

    def dataframe(self, spark: Any) -> Any:
        """The rows as a DataFrame, typed as Spark infers them from the head (session aware); no
        rows: every column a string."""
        if not self.head:
            from pyspark.sql.types import StringType, StructField, StructType

            return spark.createDataFrame([], StructType([StructField(f, StringType()) for f in self.fields]))
        schema = spark.createDataFrame(list(self.head), schema=list(self.fields)).schema
        return spark.createDataFrame(self.rows, schema=schema)

    def write(self, spark: Any, path: str) -> tuple[str, int | None]:
        """Writes the rows to ``path`` (overwriting it, as Spark's overwrite mode does): JSON lines
        when it ends in .json/.jsonl, else Parquet. Returns the format's name and the number of
        rows written when the writer knows it (Spark's writers do not say)."""
        if path.endswith((".json", ".jsonl")):
            self.dataframe(spark).write.mode("overwrite").json(path)
            return JSON_LINES, None
        local = _local_path(path) if str(spark.sparkContext.master).startswith("local") else None
        if local is None:
            self.dataframe(spark).write.mode("overwrite").parquet(path)
            return PARQUET, None
        where = f"--output {self.name}={path}"
        return PARQUET, write_parquet_local(self.rows, self.schema(where), local, where)

    def schema(self, where: str) -> Any:
        """The schema Spark's inference gives the head with its default settings (all strings for
        no rows); a field None in every head row has no type to write: one clear error."""
        from pyspark.sql.types import (
            NullType,
            StringType,
            StructField,
            StructType,
            _has_nulltype,
            _infer_schema,
            _merge_type,
        )

        if not self.head:
            return StructType([StructField(f, StringType()) for f in self.fields])
        try:
            schema = functools.reduce(_merge_type, (_infer_schema(r, list(self.fields)) for r in self.head))
        except (TypeError, ValueError) as e:  # Spark's inference refuses them: its message, on one line
            raise BatchError(f"{where}: the first {len(self.head)} rows do not agree on their types: "
                             f"{' '.join(str(e).split())}") from None
        if _has_nulltype(schema):
            unknown = [f.name for f in schema.fields if _has_nulltype(f.dataType)]
            plain = [f.name for f in schema.fields if f.dataType == NullType()]
            one = len(unknown) == 1
            what = ("is None" if one else "are None") if unknown == plain else (
                f"{'is' if one else 'are'} None or {'holds' if one else 'hold'} only empty or None values")
            raise BatchError(f"{where}: field{'' if one else 's'} {', '.join(repr(u) for u in unknown)} {what} "
                             f"in all of the first {len(self.head)} rows, so {'its' if one else 'their'} type "
                             f"cannot be inferred; expected at least one value of {'its' if one else 'each'} "
                             f"type among them")
        return schema


def _local_path(path: str) -> Path | None:
    """``path`` as a path on this machine, or None when it names another file system."""
    if path.startswith("file:"):
        path = path[len("file:"):]
        if path.startswith("//"):
            path = path[2:]
    elif "://" in path:
        return None
    return Path(path).absolute()


def write_parquet_local(rows: Any, schema: Any, folder: Path, where: str) -> int:
    """Writes the RDD ``rows`` to ``folder`` as Parquet, one file per partition, in ``schema``
    (a Spark StructType), replacing what ``folder`` held. Returns the number of rows. The files
    are written to a hidden folder beside it, which replaces ``folder`` only once every
    partition is written: a row that does not fit the schema fails the write with one error
    naming the row (``where`` says which output), and the earlier output is still there."""
    job = uuid.uuid4().hex[:12]
    staging = folder.parent / f".{folder.name}.heron-py-{job}"
    for above in (folder.parent, *folder.parent.parents):
        if above.exists() and not above.is_dir():
            raise BatchError(f"{where}: {above} is a file; expected a folder there")
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
    except OSError as e:
        raise BatchError(f"{where}: cannot create a folder beside the output: {e.strerror or e} "
                         f"({e.filename or staging})") from None
    schema_json = schema.json()
    try:
        results = rows.mapPartitionsWithIndex(
            lambda i, it: [write_partition(schema_json, staging, i, f"part-{i:05d}-{job}.snappy.parquet", it)]
        ).collect()
        errors = [error for _, error in results if error is not None]
        if errors:  # the first partition's, so the same input gives the same report
            raise BatchError(f"{where}: {errors[0]}")
        for stale in staging.glob(".part-*"):  # a failed attempt's file
            stale.unlink()
        (staging / "_SUCCESS").touch()
        if folder.is_dir() and not folder.is_symlink():
            shutil.rmtree(folder)
        elif folder.exists() or folder.is_symlink():
            folder.unlink()
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return sum(n for n, _ in results)


def _short(row: Any) -> str:
    text = repr(row)
    return text if len(text) <= 200 else text[:197] + "..."


def write_partition(schema_json: str, folder: Path, partition: int, name: str,
                    rows: Iterator[tuple[Any, ...]]) -> tuple[int, str | None]:
    """In a Spark worker: checks and converts each row as ``createDataFrame`` would, and writes
    them to ``folder/name`` in row groups of CHUNK_ROWS. A retried task writes its own
    attempt's file and replaces the earlier attempt's. Returns the rows written, or, for a row
    that does not fit, no file and the error: returned, not raised, since a retry cannot mend
    the data, and Spark would log a failed task's traceback before the driver could say what
    was wrong in one line."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType, _make_type_verifier

    schema = StructType.fromJson(json.loads(schema_json))
    # internal timestamps are microseconds since the epoch in UTC (toInternal converts local times)
    arrow = to_arrow_schema(schema, timezone="UTC")
    verify, to_internal = _make_type_verifier(schema), schema.toInternal
    attempt = folder / f".{name}.{uuid.uuid4().hex[:8]}"
    n = 0
    with pq.ParquetWriter(str(attempt), arrow, compression="snappy") as writer:
        chunk: list[Any] = []

        def flush() -> None:
            columns = list(zip(*chunk, strict=True)) if chunk else [() for _ in arrow]
            writer.write_table(pa.Table.from_arrays(
                [pa.array(list(c), type=f.type) for c, f in zip(columns, arrow, strict=True)], schema=arrow))
            chunk.clear()

        for row in rows:
            try:
                verify(row)
            except (TypeError, ValueError) as e:
                writer.close()
                attempt.unlink()
                # Spark's own message, which row, and what the schema expected
                return n, (f"row index {n} of partition {partition} {_short(row)} does not fit the types inferred "
                           f"from the first rows ({schema.simpleString()}): {' '.join(str(e).split())}")
            chunk.append(to_internal(row))
            n += 1
            if len(chunk) >= CHUNK_ROWS:
                flush()
        if chunk or n == 0:
            flush()  # an empty partition still gets a file: the folder then carries the schema
    os.replace(attempt, folder / name)
    return n, None
