"""Run a topology on PySpark over bounded data.

Each spout becomes a bounded source: a file or DataFrame given as its input, or the spout
itself run to exhaustion inside a Spark task when its class says ``bounded = True`` (it
stops emitting when its data ends). Each bolt task is one Spark partition, where the bolt
class runs unchanged: ``initialize``, ``process`` per tuple, and, when its config sets
``topology.tick.tuple.freq.secs``, one ``process_tick`` after its last tuple (so bolts that
emit on ticks emit their final state). ``ack``/``fail`` are accepted and do nothing: a batch
run has no replays; a failed Spark task is retried by Spark from its input. Every bolt runs,
also one that nothing reads and no output asks for (a sink that writes to its own store).

Records between stages are ``(destination task, (source task, pickled batch of (stream,
values) rows))``, the emitter's own batches; the stage of a bolt takes the records addressed
to its tasks and partitions them by task (see plan.py).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import logging
import random
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from heron_py.common.config import ReliabilityConfig
from heron_py.common.framing import BATCH_HEADER, BODY_OFFSET, HEADER_SIZE, MsgType, frame_type
from heron_py.common.package import load_main, unpack
from heron_py.common.serialization import MAIN_ALIAS, loads_user_object
from heron_py.planner.errors import TopologyError
from heron_py.planner.model import ComponentKind, TopologyDef
from heron_py.runtime.host import BoltHost, HostOptions, SpoutHost, make_host
from heron_py.spark import text_input
from heron_py.spark.output import BatchOutput
from heron_py.spark.plan import BatchError, plan_batch

Record = tuple[int, tuple[int, bytes]]
# at most this many next_tuple calls in a row that emit nothing end a bounded spout
IDLE_CALLS = 1000
# input rows handed at once to a spout that takes its input itself (a Streamlet source: its
# fused operators run per batch), as many as a source takes in one next_tuple at most
INPUT_CHUNK = 512

_log = logging.getLogger("heron_py.spark")
_loaded: dict[str, str] = {}  # package digest -> folder, per Python worker process


def _ensure_package(package: bytes | None) -> None:
    """Makes the topology's classes importable in this (Spark worker) process: the package is
    unpacked once per worker and loaded as ``__heron_main__``, as an executor does. Without a
    package, the classes must be importable where they were defined (a module, not __main__)."""
    if package is None:
        return
    digest = hashlib.sha256(package).hexdigest()[:16]
    if _loaded.get("current") == digest:
        return
    folder = _loaded.get(digest)
    if folder is None:
        folder = tempfile.mkdtemp(prefix=f"heron-py-batch-{digest}-")
        unpack(package, Path(folder))
        _loaded[digest] = folder
    # a reused worker may have run another topology: its main module must not shadow this one
    sys.modules.pop(MAIN_ALIAS, None)
    load_main(Path(folder))
    _loaded["current"] = digest


@dataclass(frozen=True)
class StageSpec:
    """What a Spark task needs to run one component's task: shipped by pickle to workers."""

    topology_json: str
    component: str
    capture: frozenset[str]  # streams whose emitted tuples are kept as output
    seed: int


class _Task:
    """One task of a component inside a Spark partition: a component host whose emitted
    batches become records for the next stage, and whose captured streams become output."""

    def __init__(self, spec: StageSpec, index: int) -> None:
        topology = TopologyDef.from_dict(json.loads(spec.topology_json))
        plan = plan_batch(topology)
        task_id = plan.tasks_of(spec.component)[index]
        pplan = plan.physical()
        self.frames: list[bytes] = []
        self.outputs: list[tuple[str, list[Any]]] = []
        capture, outputs = spec.capture, self.outputs

        def tap(stream: str, values: Sequence[Any]) -> None:
            if stream in capture:
                outputs.append((stream, list(values)))

        # a batch run has no replays (a failed Spark task is retried from its input): at most once
        options = HostOptions(reliability=ReliabilityConfig(), tap=tap if capture else None,
                              rng=random.Random(spec.seed * 7919 + task_id))
        self.host = make_host(pplan, task_id, self.frames.extend, options)
        self.host.initialize()

    def drain(self) -> Iterator[tuple[str, Any]]:
        frames, self.frames[:] = list(self.frames), []
        for f in frames:
            if frame_type(f) != MsgType.TUPLE_BATCH:
                continue  # acks: a batch run does not track tuples
            dest, src, _ = BATCH_HEADER.unpack_from(f, HEADER_SIZE)
            # the batch body stays as the emitter pickled it (C pickler, up to 1024 tuples): Spark
            # then serializes one bytes object per batch instead of every tuple on its own
            yield ("r", (dest, (src, f[BODY_OFFSET:])))
        outs, self.outputs[:] = list(self.outputs), []
        for stream, values in outs:
            yield ("o", (stream, values))


def run_bolt_partition(spec: StageSpec, package: bytes, index: int,
                       records: Iterable[Record]) -> Iterator[tuple[str, Any]]:
    _ensure_package(package)
    task = _Task(spec, index)
    host = task.host
    assert isinstance(host, BoltHost)
    host.start()
    for _dest, (src, body) in records:
        host.process_body(src, body)
        if len(task.frames) > 8 or len(task.outputs) > 8192:
            yield from task.drain()
    if host.tick_s is not None:
        host.tick()  # bolts that emit on ticks emit their final state
    host.close()
    yield from task.drain()


def run_spout_input_partition(spec: StageSpec, package: bytes, index: int, rows: Iterable[Sequence[Any]],
                              stream: str = "default", par: int = 1) -> Iterator[tuple[str, Any]]:
    """Partition ``index`` of a spout's input, emitted on ``stream`` as the spout's task ``index
    mod par`` would. The spout's own code does not run for an input (its rows are the tuples),
    so the input keeps its partitions: every core reads and routes a share, instead of one
    partition per spout task after a shuffle of the whole input. A Streamlet source's spout
    (``heron_input``) still runs the operators fused behind the source on its rows."""
    _ensure_package(package)
    task = _Task(spec, index % par)
    feed = getattr(task.host.user, "heron_input", None)
    if callable(feed):
        # a Streamlet source: its rows go through the operators fused behind it (a spout named
        # "lines__flatmap-1" maps its input as the streaming run does), a chunk at a time
        chunk: list[Sequence[Any]] = []
        for values in rows:
            chunk.append(values)
            if len(chunk) >= INPUT_CHUNK:
                feed(chunk)
                chunk = []
                if len(task.frames) > 8:
                    yield from task.drain()
        if chunk:
            feed(chunk)
    else:
        emit = task.host.emitter.emit
        for values in rows:
            emit(list(values), stream, None, False)
            if len(task.frames) > 8:
                yield from task.drain()
    task.host.flush()
    yield from task.drain()


def run_bounded_spout_partition(spec: StageSpec, package: bytes, index: int,
                                _rows: Iterable[Any]) -> Iterator[tuple[str, Any]]:
    _ensure_package(package)
    task = _Task(spec, index)
    spout = task.host
    assert isinstance(spout, SpoutHost)
    spout.start()
    idle = 0
    while idle < IDLE_CALLS:
        idle = 0 if spout.next_tuples(1) else idle + 1
        if len(task.frames) > 8:
            yield from task.drain()
    spout.flush()
    yield from task.drain()


def _input_stream(spout: Any) -> Any:
    """The stream an --input file feeds: the spout's default stream, or its only stream (a
    Streamlet source declares just "output")."""
    out = spout.output("default")
    if out is not None:
        return out
    if len(spout.outputs) == 1:
        return spout.outputs[0]
    raise BatchError(f"--input {spout.name}: spout '{spout.name}' declares no 'default' stream and "
                     f"{len(spout.outputs)} others ({', '.join(s.name for s in spout.outputs) or 'none'}); "
                     f"expected one stream for the input's rows")


def _input_rows(spark: Any, spout: str, fields: Sequence[str], source: Any) -> Any:
    """An RDD of value lists for a spout, from a path (text, JSON lines, Parquet) or a DataFrame."""
    from pyspark.sql import DataFrame

    where = f"--input {spout}"
    if isinstance(source, DataFrame):
        df = source
    else:
        path = str(source)
        p = Path(path)
        if not p.exists():
            raise BatchError(f"{where}={path}: no such file or directory")
        parquet = p.suffix == ".parquet" or (p.is_dir() and any(p.glob("*.parquet")))
        if p.suffix in (".json", ".jsonl") or (p.is_dir() and any(p.glob("*.json"))):
            df = spark.read.json(path)
        elif parquet:
            df = spark.read.parquet(path)
        else:
            if len(fields) != 1:
                raise BatchError(f"{where}={path}: a text input gives one value per line, but spout '{spout}' "
                                 f"declares {len(fields)} fields {list(fields)}; use JSON lines or Parquet")
            sc = spark.sparkContext
            if str(sc.master).startswith("local") and text_input.readable_here(p):
                # the workers read the file themselves, in textFile's splits and lines (text_input.py)
                parts = text_input.splits(p.stat().st_size, min(sc.defaultParallelism, 2))
                local = str(p.absolute())
                return sc.parallelize(parts, len(parts)).mapPartitions(
                    lambda ranges: (row for start, end in ranges for row in text_input.read_lines(local, start, end)))
            return sc.textFile(path).map(lambda line: [line])
        where = f"{where}={path}"
    missing = [f for f in fields if f not in df.columns]
    if missing:
        raise BatchError(f"{where}: spout '{spout}' declares fields {list(fields)}, but the input has no "
                         f"column {', '.join(repr(m) for m in missing)} (columns: {df.columns})")
    return df.select(*fields).rdd.map(list)


def _drain(records: Iterator[Any]) -> None:
    for _ in records:
        pass


def _head(rows: Any, n: int) -> list[Any]:
    """The first ``n`` rows in partition order (what ``take(n)`` returns), with every partition
    computed in one job, in parallel."""
    per_part = rows.mapPartitions(lambda it: [list(itertools.islice(it, n))]).collect()
    return list(itertools.islice(itertools.chain.from_iterable(per_part), n))


def run_topology_batch(spark: Any, topology: Any, inputs: Mapping[str, Any], outputs: Iterable[str], *,
                       package: bytes | None = None, seed: int = 0) -> dict[str, Any]:
    """Runs ``topology`` (a TopologyDef, or a builder / Topology class with ``build()``) on
    ``spark`` and returns a DataFrame per requested output (``"bolt"`` for its default stream
    or ``"bolt:stream"``), with the stream's declared fields as columns. ``inputs`` maps spouts
    to paths or DataFrames. ``package`` is a topology package (heron_py.common.package) that
    carries code defined in a topology file to the Spark workers; without it the components'
    classes must be importable from their modules on the workers."""
    outs = batch_outputs(spark, topology, inputs, outputs, package=package, seed=seed)
    return {name: out.dataframe(spark) for name, out in outs.items()}


def batch_outputs(spark: Any, topology: Any, inputs: Mapping[str, Any], outputs: Iterable[str], *,
                  package: bytes | None = None, seed: int = 0) -> dict[str, BatchOutput]:
    """As run_topology_batch, but each output as a BatchOutput (rows, fields, head), which the
    CLI writes without a DataFrame where it can (see heron_py.spark.output)."""
    if not isinstance(topology, TopologyDef):
        topology = topology.build()
    from heron_py.planner.logical import validate

    validate(topology)
    plan = plan_batch(topology)
    sc = spark.sparkContext
    pkg = sc.broadcast(package)
    tjson = json.dumps(topology.to_dict())
    wanted: dict[str, tuple[str, str]] = {}
    for o in outputs:
        comp, _, stream = o.partition(":")
        stream = stream or "default"
        try:
            c = topology.component(comp)
        except (KeyError, TopologyError):
            c = None
        if c is None or c.kind is not ComponentKind.BOLT:
            bolts = ", ".join(n for n in plan.order)
            raise BatchError(f"--output {o}: the topology has no bolt '{comp}'; expected one of {bolts}")
        if c.output(stream) is None:
            raise BatchError(f"--output {o}: bolt '{comp}' declares no stream '{stream}'; it declares "
                             f"{', '.join(s.name for s in c.outputs) or 'none'}")
        wanted[o] = (comp, stream)
    capture = {name: frozenset(s for (c2, s) in wanted.values() if c2 == name) for name, _ in wanted.values()}

    # A stage is kept (persisted) only when more than one job or stage reads it: a bolt's
    # records read by one bolt go through that bolt's shuffle once (Spark reuses shuffle files
    # across jobs), and unpersisted, the component runs in the same Python pass as the filter
    # and the partitioning after it, instead of its records going to the JVM's cache and back.
    readers = collections.Counter(u for c in topology.components for u in {i.component for i in c.inputs})
    for comp_name, _ in wanted.values():
        readers[comp_name] += 2  # the output's head job and its write

    def keep(name: str, rdd: Any) -> Any:
        return rdd.persist() if readers[name] > 1 else rdd

    stages: dict[str, Any] = {}
    for spout in plan.spouts():
        sdef = topology.component(spout)
        spec = StageSpec(tjson, spout, frozenset(), seed)
        par = sdef.par
        if spout in inputs:
            out = _input_stream(sdef)
            rows = _input_rows(spark, spout, list(out.fields), inputs[spout])
            stage = rows.mapPartitionsWithIndex(
                lambda i, it, spec=spec, s=out.name, par=par: run_spout_input_partition(spec, pkg.value, i, it, s,
                                                                                        par))
        else:
            _ensure_package(package)  # the driver needs the spout's class too, to ask it
            cls = loads_user_object(sdef.class_ref.data)
            if not getattr(cls, "bounded", False):
                raise BatchError(f"spout '{spout}' has no --input and does not declare itself bounded "
                                 f"(class attribute bounded = True); give --input {spout}=PATH")
            stage = sc.parallelize(range(par), par).mapPartitionsWithIndex(
                lambda i, it, spec=spec: run_bounded_spout_partition(spec, pkg.value, i, it))
        stages[spout] = keep(spout, stage)

    for bolt in plan.order:
        bdef = topology.component(bolt)
        tasks = set(plan.tasks_of(bolt))
        index = {t: i for i, t in enumerate(plan.tasks_of(bolt))}
        upstream = {i.component for i in bdef.inputs}
        parts = [stages[u].filter(lambda r, tasks=tasks: r[0] == "r" and r[1][0] in tasks).map(lambda r: r[1])
                 for u in sorted(upstream)]
        rdd = parts[0] if len(parts) == 1 else sc.union(parts)
        rdd = rdd.partitionBy(bdef.par, lambda task, index=index: index[task])
        spec = StageSpec(tjson, bolt, capture.get(bolt, frozenset()), seed)
        stages[bolt] = keep(bolt, rdd.mapPartitionsWithIndex(
            lambda i, it, spec=spec: run_bolt_partition(spec, pkg.value, i, it), preservesPartitioning=False))

    # a bolt that nothing reads and no --output asks for (a sink: it writes to a store of its
    # own) still runs, as it does streaming: one job for all of them, here, since no output's
    # job would compute it
    leaves = [stages[b] for b in plan.order if readers[b] == 0]
    if leaves:
        (leaves[0] if len(leaves) == 1 else sc.union(leaves)).foreachPartition(_drain)

    results: dict[str, BatchOutput] = {}
    for name, (comp_name, stream) in wanted.items():
        fields = tuple(topology.component(comp_name).output(stream).fields)
        rows = stages[comp_name].filter(lambda r, s=stream: r[0] == "o" and r[1][0] == s).map(
            lambda r: tuple(r[1][1]))
        # one job for both questions, is it empty and what are its types: the types come from
        # the first rows as Spark's own inference takes them (up to 100 while a field is None).
        # Not take(100): it computes partition 0 alone (one core busy) and only then the rest;
        # this job runs every partition of the persisted bolt stage at once, as the write would
        results[name] = BatchOutput(name, rows, fields, tuple(tuple(r) for r in _head(rows, 100)))
    return results
