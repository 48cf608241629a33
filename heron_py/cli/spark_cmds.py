"""``heron-py batch`` and ``heron-py reconcile``: the PySpark side of the CLI."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from heron_py.planner.errors import TopologyError
from heron_py.planner.model import ComponentKind

JAVA_MISSING = ("heron-py batch and reconcile run on PySpark, which needs Java 17 or later: install a JRE "
                "(e.g. apt-get install openjdk-17-jre-headless, brew install openjdk@17) or set JAVA_HOME; "
                "found no java on PATH and no JAVA_HOME")


def java_available(environ: Any = os.environ) -> bool:
    """Whether PySpark can start its JVM: JAVA_HOME's java, or java on PATH."""
    import shutil

    home = environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return True
    return shutil.which("java", path=environ.get("PATH")) is not None


def spark_session(master: str, app: str) -> Any:
    if not java_available():
        from heron_py.cli.errors import SubmitError

        raise SubmitError(JAVA_MISSING)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # the workers run this interpreter, so they import the same heron_py and user packages
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(master).appName(app)
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.ui.showConsoleProgress", "false")
            .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def cmd_batch(args: argparse.Namespace) -> int:
    from heron_py.cli.submit import load_topology_file
    from heron_py.common.package import build_package
    from heron_py.planner.logical import validate
    from heron_py.spark.batch import batch_outputs
    from heron_py.spark.output import JSON_LINES
    from heron_py.spark.plan import parse_assignments

    path = Path(args.file)
    topo = load_topology_file(path, args.args)
    validate(topo)
    kinds = {c.name: c.kind for c in topo.components}
    inputs = parse_assignments(args.input, "--input", kinds, ComponentKind.SPOUT)
    outputs: dict[str, str] = {}
    for item in args.output:
        target, sep, out_path = item.partition("=")
        comp = target.partition(":")[0]
        if not sep or not target or not out_path:
            raise TopologyError(f"--output: expected BOLT[:STREAM]=PATH, found {item!r}")
        if kinds.get(comp) is not ComponentKind.BOLT:
            bolts = sorted(n for n, k in kinds.items() if k is ComponentKind.BOLT)
            raise TopologyError(f"--output {item}: the topology has no bolt '{comp}'; expected one of "
                                f"{', '.join(bolts)}")
        outputs[target] = out_path
    for spout, p in inputs.items():
        if not Path(p).exists():
            raise TopologyError(f"--input {spout}={p}: no such file or directory")
    package = build_package(path.resolve(), list(args.args), [p for p in sys.path if p])
    spark = spark_session(args.master, f"heron-py batch {topo.name}")
    try:
        t0 = time.monotonic()
        results = batch_outputs(spark, topo, inputs, list(outputs), package=package)
        written = {target: results[target].write(spark, out_path) for target, out_path in outputs.items()}
        took = time.monotonic() - t0  # the run and its output written; counting the rows back is not part of it
        for target, out_path in outputs.items():
            fmt, n = written[target]
            if n is None:  # Spark's writers do not say how many rows they wrote
                n = spark.read.json(out_path).count() if fmt == JSON_LINES else spark.read.parquet(out_path).count()
            print(f"{target} -> {out_path} ({n} rows, {fmt})")
        print(f"batch run of '{topo.name}' on {args.master} took {took:.1f} s")
    finally:
        spark.stop()
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    from heron_py.spark.reconcile import read_output, reconcile

    spark = spark_session(args.master, "heron-py reconcile")
    try:
        s = read_output(spark, args.stream, "--stream")
        b = read_output(spark, args.batch, "--batch")
        report = reconcile(spark, s, b, args.key, args.version)
        print(report.render())
        return 0 if report.ok else 1
    finally:
        spark.stop()


def add_parser(add_parser: Any) -> None:
    p = add_parser("batch", help="run a topology over bounded inputs on PySpark")
    p.usage = "heron-py batch [options] FILE [TOPOLOGY ARG ...] [-- TOPOLOGY ARG ...]"
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--input", action="append", default=[], metavar="SPOUT=PATH",
                   help="a spout's bounded input: text (one value per line), .json/.jsonl, or Parquet")
    p.add_argument("--output", action="append", default=[], metavar="BOLT[:STREAM]=PATH",
                   help="write what a bolt emits: Parquet folder, or JSON lines when PATH ends in .json/.jsonl")
    p.add_argument("file", metavar="FILE", help="the topology file (its words after FILE go to the topology)")
    p.set_defaults(fn=cmd_batch)

    p = add_parser("reconcile", help="compare a stream's output with a batch run's, by key (exit 1 on any difference)")
    p.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    p.add_argument("--stream", required=True, metavar="PATH", help="the streaming run's output (Parquet or JSON lines)")
    p.add_argument("--batch", required=True, metavar="PATH", help="the batch run's output (Parquet or JSON lines)")
    p.add_argument("--key", required=True, nargs="+", metavar="FIELD", help="the fields that identify a row")
    p.add_argument("--version", default=None, metavar="FIELD",
                   help="keep only each key's row with the greatest FIELD (streams of updates)")
    p.set_defaults(fn=cmd_reconcile)
