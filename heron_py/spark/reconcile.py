"""Compare a streaming run's output with a batch run's, by key, on Spark.

Both sides are read (Parquet folder or file, or JSON lines by extension), exact duplicate
rows are dropped (at-least-once replays write the same row twice), and with ``version`` only
each key's row with the greatest version value is kept (a stream of updates, such as running
counts, is compared by its last state). Then a full outer join by key reports keys missing
from the stream, extra in the stream, and present in both with different values. Without
``version``, a key that still has more than one row on a side is reported as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from heron_py.planner.errors import TopologyError


class ReconcileError(TopologyError):
    pass


@dataclass
class Report:
    stream_keys: int
    batch_keys: int
    missing: int
    extra: int
    differing: int
    duplicate_keys: int
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not (self.missing or self.extra or self.differing or self.duplicate_keys)

    def render(self) -> str:
        lines = [f"reconcile: {self.batch_keys} keys in the batch output, {self.stream_keys} in the stream output: "
                 f"{self.missing} missing, {self.extra} extra, {self.differing} differing"
                 + (f", {self.duplicate_keys} keys with more than one row" if self.duplicate_keys else "")]
        for kind, rows in self.examples.items():
            for r in rows:
                lines.append(f"  {kind}: {r}")
        return "\n".join(lines)


def read_output(spark: Any, path: str, where: str) -> Any:
    p = Path(path)
    if not p.exists():
        raise ReconcileError(f"{where} {path}: no such file or directory")
    if p.suffix in (".json", ".jsonl") or (p.is_dir() and any(p.glob("*.json")) and not any(p.glob("*.parquet"))):
        return spark.read.json(path)
    return spark.read.parquet(path)


def reconcile(spark: Any, stream_df: Any, batch_df: Any, keys: Sequence[str], version: str | None = None,
              examples: int = 10) -> Report:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    for side, df in (("--stream", stream_df), ("--batch", batch_df)):
        for k in [*keys, *([version] if version else [])]:
            if k not in df.columns:
                raise ReconcileError(f"{side}: no column '{k}' to compare by; columns: {df.columns}")
    cols = sorted(set(stream_df.columns) & set(batch_df.columns))
    values = [c for c in cols if c not in keys]

    def prepare(df: Any) -> Any:
        df = df.select(*cols).distinct()
        if version:
            w = Window.partitionBy(*keys).orderBy(F.col(version).desc())
            df = df.withColumn("__rank", F.row_number().over(w)).filter("__rank = 1").drop("__rank")
        return df

    s, b = prepare(stream_df), prepare(batch_df)
    dup = 0
    if not version:
        dup = (s.groupBy(*keys).count().filter("count > 1").count()
               + b.groupBy(*keys).count().filter("count > 1").count())
    sa = s.select(*keys, F.struct(*values).alias("__s")) if values else s.select(*keys, F.lit(1).alias("__s"))
    ba = b.select(*keys, F.struct(*values).alias("__b")) if values else b.select(*keys, F.lit(1).alias("__b"))
    j = sa.join(ba, on=list(keys), how="full_outer").cache()
    missing = j.filter("__s IS NULL")
    extra = j.filter("__b IS NULL")
    differing = j.filter("__s IS NOT NULL AND __b IS NOT NULL AND NOT (__s <=> __b)")
    report = Report(stream_keys=s.select(*keys).distinct().count(), batch_keys=b.select(*keys).distinct().count(),
                    missing=missing.count(), extra=extra.count(), differing=differing.count(), duplicate_keys=dup)

    def show(df: Any, what: str) -> list[str]:
        out = []
        for r in df.orderBy(*keys).limit(examples).collect():
            key = ", ".join(f"{k}={r[k]!r}" for k in keys)
            sv = r["__s"].asDict() if r["__s"] is not None and values else r["__s"]
            bv = r["__b"].asDict() if r["__b"] is not None and values else r["__b"]
            out.append(f"{key}: stream {sv}, batch {bv}" if what == "differing" else key)
        return out

    for what, df, n in (("missing", missing, report.missing), ("extra", extra, report.extra),
                        ("differing", differing, report.differing)):
        if n:
            report.examples[what] = show(df, what)
    j.unpersist()
    return report
