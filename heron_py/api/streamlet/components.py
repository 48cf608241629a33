"""The spouts and bolts a Streamlet graph compiles to (module level: the plan pickles them by
reference). Each reads its user function or object from its config in initialize() and emits
one-field tuples on the stream "output", as heronpy's.

The windowed operators are in window_components.py.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.metrics import CountMetric, IMetric
from heron_py.api.spout.spout import Spout
from heron_py.api.state.stateful_component import StatefulComponent
from heron_py.api.stream import Stream
from heron_py.api.streamlet import chain as chain_mod
from heron_py.api.streamlet import combine, functions, groupings
from heron_py.api.streamlet import source as source_mod
from heron_py.api.streamlet.context import Context

OUTPUT_STREAM = "output"
OUTPUT_FIELD = "_output_"
# every bolt's config: its parents' component names, in the order the operator was given them
PARENTS = "streamlet.parents"
FUNCTION = "function"  # heronpy's key names
OPERATOR = "operator"
GENERATOR = "generator"
SINK = "sink"
# a fused task's operators (graph.fuse): kinds and streamlet names, comma-separated, in order
FUSED_KINDS = "streamlet.fused.kinds"
FUSED_NAMES = "streamlet.fused.names"
FUSED_FUNCTION_PREFIX = "streamlet.fused.function."
# per operator: elements in, out and failed, user metrics of the task that runs it
METRIC_PREFIX = "streamlet-op/"
METRIC_BUCKET_S = 10


class ContextImpl(Context):
    """The Context of one task: its TopologyContext, saved state and emitter."""

    def __init__(self, top_context: Any, state: Any, emitter: Any) -> None:
        self._top_context = top_context
        self._state = state
        self._emitter = emitter

    def get_task_id(self) -> int:
        return int(self._top_context.get_task_id())

    def get_config(self) -> dict[str, Any]:
        return dict(self._top_context.get_cluster_config())

    def get_stream_name(self) -> str:
        sources = self._top_context.get_this_sources() or {}
        # a source has no input: heronpy failed here; the stream it writes is the useful answer
        return str(next(iter(sources)).id) if sources else OUTPUT_STREAM

    def _tasks(self) -> list[int]:
        return sorted(self._top_context.get_component_tasks(self._top_context.get_component_id()))

    def get_num_partitions(self) -> int:
        return len(self._tasks())

    def get_partition_index(self) -> int:
        return self._tasks().index(self.get_task_id())

    def get_state(self) -> Any:
        return self._state

    def emit(self, values: Any) -> None:
        self._emitter.emit([values], stream=OUTPUT_STREAM)


class StreamletSpout(Spout):
    outputs = [Stream(fields=[OUTPUT_FIELD], name=OUTPUT_STREAM)]


class StreamletBolt(Bolt):
    outputs = [Stream(fields=[OUTPUT_FIELD], name=OUTPUT_STREAM)]

    def _load(self, config: dict[str, Any], context: Any, key: str) -> Any:
        return functions.unpack(config, key, str(context.get_component_id()))


# a combining source's batches may hold this many times the usual elements, and take this many
# times the usual time (SourceSpout)
COMBINED_BATCH_FACTOR = 8


class SourceSpout(StreamletSpout):
    """A source and the element operators fused behind it (graph.fuse; none without fusion).

    Each ``next_tuple`` takes a batch of elements from the source (source.py: one C-level loop,
    sized by ``BatchSizer``), runs the fused operators over it (chain.py) and emits what comes
    out in one call. The tuples are untracked, as heronpy's sources' are: an element an
    operator raises on is logged, counted (``streamlet-op/NAME/failed``) and dropped, and the
    rest of the batch flows. An error of the source itself still ends the task, after what
    the source gave before it went out."""

    limits = source_mod.BatchLimits()
    # Emitter.emit_one_many(values, stream), set on the instance by a host that lets a spout
    # emit a batch in one call (nothing needs to see each emit); None: see batch_emit
    heron_emit_one_many: Callable[[list[Any], str], None] | None = None
    # how a batch is timed (the sizer's input); a test replaces it on the instance
    clock: Callable[[], float] = staticmethod(time.perf_counter)

    def _open(self, config: dict[str, Any], context: Any) -> Callable[[int, list[Any]], None]:
        """The source's fill(n, out), once set up in this task."""
        raise NotImplementedError(f"{type(self).__name__} does not implement _open()")

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._component = str(context.get_component_id())
        self._fill = self._open(config, context)
        ops = fused_ops(config, self._component, lambda key: functions.unpack(config, key, self._component))
        self.chain = chain_mod.Chain(ops) if ops else None
        self._names = [op.name for op in ops]
        self._kinds = [op.kind for op in ops]
        self._failed = [0] * len(ops)
        self._emit_batch: Callable[[list[Any]], None] | None = None
        if self.chain is not None:
            register_chain_metrics(context, self.chain, self._names, self._failed)
        # count_by_key's combiner (combine.py): this task counts each batch's keys for it
        self._count_key: Callable[[Any], Any] | None = None
        self._router: groupings.RepartitionGrouping | None = None
        limits = self.limits
        if config.get(combine.COMBINE_KEY_FUNCTION):
            self._count_key = functions.unpack(config, combine.COMBINE_KEY_FUNCTION, self._component)
            self._count_where = str(config.get(combine.COMBINE_WHERE, self._component))
            self._count_bad = task_counter(context, combine.METRIC_BAD)
            if config.get(combine.COMBINE_PARTITIONER):
                # the repartition between: its function called here on each element (partitions 0..n-1)
                self._router = groupings.RepartitionGrouping(str(config[combine.COMBINE_PARTITIONER_WHERE]),
                                                             config[combine.COMBINE_PARTITIONER])
                self._router.prepare(context, self._component, OUTPUT_STREAM,
                                     list(range(int(config[combine.COMBINE_PARTITIONS]))))
            # what a batch sends is a pair per distinct key, so a larger batch sends fewer pairs
            # per element (2,000 words of the benchmark's 1,000-word vocabulary hold 854 keys,
            # 20,000 hold 1,000). The time target grows too, or it caps the batch first: the
            # counts are emitted only on ticks or at the end anyway, and a tick-mode count
            # bounds the wait to a quarter of its tick
            target = limits.target_s * COMBINED_BATCH_FACTOR
            if config.get(combine.COMBINE_MAX_BATCH_S) is not None:
                target = max(limits.target_s, min(target, float(config[combine.COMBINE_MAX_BATCH_S])))
            limits = dataclasses.replace(limits, max_elements=limits.max_elements * COMBINED_BATCH_FACTOR,
                                         target_s=target)
        self._sizer = source_mod.BatchSizer(limits)

    def _on_count_error(self, element: Any, error: Exception) -> None:
        combine.log_bad_element(self.logger, self._count_where, "key_function", element, error,
                                "dropped (its tuple is not tracked)")
        self._count_bad.incr()

    def _on_error(self, index: int, element: Any, error: Exception) -> None:
        self._failed[index] += 1
        log_op_error(self.logger, self._names[index], self._kinds[index], element, error,
                     "dropped (its tuple is not tracked)")

    def next_tuple(self) -> None:
        emit = self._emit_batch
        if emit is None:  # hooks, a tap or a serializer are known only after initialize()
            emit = self._emit_batch = batch_emit(self)
        clock = self.clock
        t0 = clock()
        xs: list[Any] = []
        try:
            self._fill(self._sizer.size, xs)
        except Exception:
            self._send(xs, emit)  # what the source gave before its error goes out, as it did
            raise
        self._send(xs, emit)
        self._sizer.observe(len(xs), clock() - t0)

    def heron_input(self, rows: Sequence[Sequence[Any]]) -> None:
        """Elements given from outside in place of the source's (``heron-py batch --input``: a
        row per element, its one value): the operators fused behind the source, and a
        combiner, run on them as on a batch the source took, so an input file feeds what the
        source would have fed."""
        emit = self._emit_batch
        if emit is None:
            emit = self._emit_batch = batch_emit(self)
        self._send([row[0] for row in rows], emit)

    def _send(self, xs: list[Any], emit: Callable[[list[Any]], None]) -> None:
        if not xs:
            return
        outs = xs if self.chain is None else self.chain.run(xs, self._on_error)
        error: Exception | None = None
        if outs and self._count_key is not None:
            r = self._router
            partitioner = None if r is None else (r.function(), len(r.target_tasks), r.indexes)
            outs, error = combine.combined_counts(self._count_key, outs, self._on_count_error, partitioner)
        if outs:
            emit(outs)
        if error is not None:  # the repartition function's: after what it routed, as the engine's emit
            raise error


def batch_emit(spout: Spout) -> Callable[[list[Any]], None]:
    """How a source spout emits a batch of elements on ``OUTPUT_STREAM`` (one field: each
    element is a tuple's one value), untracked.

    ``Emitter.emit_one_many`` (one call, the stream's checks once, no tuple built per element)
    when nothing needs to see each emit: no task hooks, no tap (the batch runner's output
    capture), no serializer. The host binds it as ``heron_emit_one_many`` then
    (runtime/host.py). Otherwise one ``emit`` per tuple, which passes every one of them through
    the delegate as before."""
    one = getattr(spout, "heron_emit_one_many", None)
    if callable(one):
        bare = one

        def emit_bare(elements: list[Any]) -> None:
            bare(elements, OUTPUT_STREAM)

        return emit_bare
    emit = spout.emit  # hooks, a tap or a serializer: each emit is seen

    def each(elements: list[Any]) -> None:
        for x in elements:
            emit([x], stream=OUTPUT_STREAM)

    return each


class SupplierSpout(SourceSpout):
    """Emits what a function returns, once per call (None included, as heronpy)."""

    def _open(self, config: dict[str, Any], context: Any) -> Callable[[int, list[Any]], None]:
        return partial(source_mod.fill_supplier, functions.unpack(config, FUNCTION, str(context.get_component_id())))


class GeneratorSpout(SourceSpout, StatefulComponent):
    """Emits what a Generator's get() returns; None means nothing right now (it ends the batch)."""

    _state: Any = None

    def init_state(self, stateful_state: Any) -> None:
        self._state = stateful_state

    def pre_save(self, checkpoint_id: str) -> None:
        """The Generator keeps its state in the State object itself."""

    def _open(self, config: dict[str, Any], context: Any) -> Callable[[int, list[Any]], None]:
        self._generator = functions.unpack(config, GENERATOR, str(context.get_component_id()))
        self._generator.setup(ContextImpl(context, self._state, self))
        return partial(source_mod.fill_generator, self._generator.get)


def fused_ops(config: dict[str, Any], component: str, load: Callable[[str], Any],
              make: Callable[[str, str, str], chain_mod.Op] | None = None) -> list[chain_mod.Op]:
    """The operators a fused task's config lists (``FUSED_KINDS``, ``FUSED_NAMES``, each one's
    packed function under ``FUSED_FUNCTION_PREFIX + index``), in order; none when it lists
    none. ``make(kind, name, key)`` builds the ones a plain function does not (pass, log, sink)."""
    kinds_s, names_s = str(config.get(FUSED_KINDS, "")), str(config.get(FUSED_NAMES, ""))
    if not kinds_s and not names_s:
        return []
    kinds, names = kinds_s.split(","), names_s.split(",")
    if len(kinds) != len(names):
        raise ValueError(f"streamlet component '{component}': config {FUSED_KINDS} and {FUSED_NAMES} "
                         f"must list as many operators, found {len(kinds)} and {len(names)}")
    built = (chain_mod.PASS, chain_mod.LOG, chain_mod.SINK) if make is not None else ()
    allowed = (*chain_mod.ELEMENT_KINDS, chain_mod.CONSUME, *built)
    ops: list[chain_mod.Op] = []
    for i, (kind, name) in enumerate(zip(kinds, names, strict=True)):
        key = f"{FUSED_FUNCTION_PREFIX}{i}"
        if kind not in allowed:
            raise ValueError(f"streamlet component '{component}': config {FUSED_KINDS} operator {i} "
                             f"('{name}'): expected one of {', '.join(allowed)}, found {kind!r}")
        if kind in built:
            assert make is not None
            ops.append(make(kind, name, key))
        else:
            ops.append(chain_mod.Op(kind, name, load(key)))
    return ops


def task_counter(context: Any, name: str) -> CountMetric:
    """The task's CountMetric ``name``, registered at its first use (the operators of one
    component share it)."""
    registered = getattr(context, "registered_metrics", {})
    metric = registered.get(name, (None,))[0]
    if isinstance(metric, CountMetric):
        return metric
    metric = CountMetric()
    context.register_metric(name, metric, METRIC_BUCKET_S)
    return metric


def register_chain_metrics(context: Any, chain: chain_mod.Chain, names: Sequence[str], failed: list[int]) -> None:
    """Per operator, elements in, out and failed (``streamlet-op/NAME/in|out|failed``)."""
    for i, name in enumerate(names):
        for what, counts in (("in", chain.counts_in), ("out", chain.counts_out), ("failed", failed)):
            context.register_metric(f"{METRIC_PREFIX}{name}/{what}", ChainMetric(counts, i), METRIC_BUCKET_S)


def log_op_error(logger: Any, name: str, kind: str, element: Any, error: Exception, outcome: str) -> None:
    """One log line naming the operator, its function, the error and the element."""
    what = {chain_mod.FLATMAP: "flat_map", chain_mod.SINK: "to_sink"}.get(kind, kind)
    logger.error("streamlet '%s' (%s): %s_function raised %s: %s for element %s; %s",
                 name, what, what, type(error).__name__, error, combine.short(element), outcome)


class ChainMetric(IMetric):
    """One operator's count of elements in or out since the last read (a user metric of the
    task that runs it: a fused task keeps each operator's counts)."""

    def __init__(self, counts: list[int], index: int) -> None:
        self.counts = counts
        self.index = index
        self.last = counts[index]

    def get_value_and_reset(self) -> int:
        now = self.counts[self.index]
        v, self.last = now - self.last, now
        return v


class ChainBolt(StreamletBolt):
    """The element operators of one task (chain.py) over each received batch.

    Untracked input (at most once, or tuples no spout tracks) comes through
    ``heron_process_batch``: the host hands it the whole batch and emits what it returns in
    one call. Tracked input comes through ``process``, one tuple at a time: its outputs are
    anchored to it and it is acked, or failed when an operator raised on it."""

    heron_batch_stream = OUTPUT_STREAM
    # heron_process_batch takes each input's one value bare and returns its outputs bare: the
    # streams between streamlet operators have one field (contracts.BatchSink)
    heron_batch_one = True
    _ops_kind = ""  # a single-operator bolt's kind; FusedBolt reads its operators from its config

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._component = str(context.get_component_id())
        self._sinks: list[Any] = []
        ops = self._read_ops(config, context)
        self.chain = chain_mod.Chain(ops)
        self._names = [op.name for op in ops]
        self._kinds = [op.kind for op in ops]
        self._failed = 0
        self._failed_by_op = [0] * len(ops)
        self._failed_now = False
        register_chain_metrics(context, self.chain, self._names, self._failed_by_op)

    def _read_ops(self, config: dict[str, Any], context: Any) -> list[chain_mod.Op]:
        kind = self._ops_kind
        if kind == chain_mod.PASS:
            return [chain_mod.Op(kind, self._component, None)]
        if kind == chain_mod.LOG:
            return [self._log_op(self._component)]
        if kind == chain_mod.SINK:
            return [self._sink_op(self._component, self._load(config, context, SINK), context)]
        return [chain_mod.Op(kind, self._component, self._load(config, context, FUNCTION))]

    def _log_op(self, name: str) -> chain_mod.Op:
        info = self.logger.info

        def log(element: Any) -> None:
            info(str(element))

        return chain_mod.Op(chain_mod.LOG, name, log)

    def _sink_op(self, name: str, sink: Any, context: Any) -> chain_mod.Op:
        sink.setup(ContextImpl(context, None, self))
        self._sinks.append(sink)
        return chain_mod.Op(chain_mod.SINK, name, sink.put)

    def _on_error(self, index: int, element: Any, error: Exception) -> None:
        self._failed += 1
        self._failed_by_op[index] += 1
        self._failed_now = True
        log_op_error(self.logger, self._names[index], self._kinds[index], element, error, self._error_outcome)

    _error_outcome = "failing its source tuple"

    def heron_process_batch(self, values: list[Any]) -> tuple[list[Any], int]:
        """A batch of input elements (each input tuple's one value, ``heron_batch_one``):
        (the output elements to emit on ``heron_batch_stream``; how many inputs failed).
        Nothing is tracked here, so a failed element is logged, counted and dropped."""
        self._error_outcome = "dropped (its tuple is not tracked)"
        before = self._failed
        outs = self.chain.run(values, self._on_error)
        failed = min(self._failed - before, len(values))  # a flat_map's outputs may fail apart
        if not self.chain.emits:
            return [], failed
        # inputs that failed are only counted: the others are "acked" by the host
        return outs, failed

    def process(self, tup: Any) -> None:
        self._error_outcome = "failing its source tuple"
        self._failed_now = False
        outs = self.chain.run([tup.values[0]], self._on_error)
        if self._failed_now:
            self.fail(tup)
            return
        emit = self.emit
        for v in outs:
            emit([v], stream=OUTPUT_STREAM, anchors=[tup])
        self.ack(tup)

    def cleanup(self) -> None:
        """The host calls a bolt's cleanup when the task closes: a sink's cleanup goes with it."""
        for sink in self._sinks:
            sink.cleanup()


class MapBolt(ChainBolt):
    _ops_kind = chain_mod.MAP


class FlatMapBolt(ChainBolt):
    """Emits each element of an iterable result, or the result itself when it is not iterable
    (heronpy's rule: a returned str is iterable, so it is emitted character by character)."""

    _ops_kind = chain_mod.FLATMAP


class FilterBolt(ChainBolt):
    _ops_kind = chain_mod.FILTER


class PassBolt(ChainBolt):
    """Forwards every element: repartition, clone and union (the grouping does the work)."""

    _ops_kind = chain_mod.PASS


class FusedBolt(ChainBolt):
    """Several streamlets' operators in one task (graph.fuse): the config lists them in order
    (``FUSED_KINDS``, ``FUSED_NAMES``, and ``FUSED_FUNCTION_PREFIX + index`` for each one's
    packed function, or a sink's object)."""

    def _read_ops(self, config: dict[str, Any], context: Any) -> list[chain_mod.Op]:
        def make(kind: str, name: str, key: str) -> chain_mod.Op:
            if kind == chain_mod.PASS:
                return chain_mod.Op(kind, name, None)
            if kind == chain_mod.LOG:
                return self._log_op(name)
            return self._sink_op(name, self._load(config, context, key), context)

        ops = fused_ops(config, self._component, lambda key: self._load(config, context, key), make)
        if not ops:
            raise ValueError(f"streamlet component '{self._component}': config {FUSED_KINDS}: expected "
                             f"the fused operators, found none")
        return ops


class FusedSinkBolt(FusedBolt):
    """A fused chain that ends in a consume, log or sink: it declares no output."""

    outputs = []


class TransformBolt(StreamletBolt, StatefulComponent):
    """Hands each input Tuple to a TransformOperator, which emits through its Context."""

    _state: Any = None

    def init_state(self, stateful_state: Any) -> None:
        self._state = stateful_state

    def pre_save(self, checkpoint_id: str) -> None:
        """The operator keeps its state in the State object itself."""

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._operator = self._load(config, context, OPERATOR)
        self._operator.setup(ContextImpl(context, self._state, self))

    def process(self, tup: Any) -> None:
        self._operator.transform(tup)
        self.ack(tup)


class LogBolt(ChainBolt):
    """Logs str(element) at INFO, one line each, in the task's log (heronpy's log())."""

    outputs = []
    _ops_kind = chain_mod.LOG


class ConsumeBolt(ChainBolt):
    outputs = []
    _ops_kind = chain_mod.CONSUME


class SinkBolt(ChainBolt):
    outputs = []
    _ops_kind = chain_mod.SINK
