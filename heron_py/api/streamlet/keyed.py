"""Keyed aggregation without a window: the bolts of ``Streamlet.reduce_by_key`` and
``Streamlet.count_by_key`` (Heron's Java ``reduceByKey``/``countByKey``).

Each task holds one plain dict, key -> current value, for the keys its input grouping sends
it (``groupings.KeyFunctionGrouping``: the same key always reaches the same task). What it
emits is ``(key, value)`` pairs on the streamlet's output stream, as Heron emits KeyValue:

- ``emit="update"`` (the default, Heron's behaviour): after each input, (key, the new value),
  anchored to that input, which is then acked.
- ``emit="tick"``: each input is folded in; on every tick (``tick_secs``) the keys changed
  since the last tick are emitted once each with their value. At least once, the inputs are
  held until then: each pair is anchored to the inputs that changed its key, which are then
  acked (otherwise each input is acked at once). What is pending is emitted when the task
  closes gracefully.
- ``emit="final"``: each input is folded in and acked at once; every key is emitted once when
  the task closes gracefully (a bounded run: tests, ``heron-py run``). Nothing anchors those
  final pairs: a failure downstream of them is not replayed.

Effectively once: the dict is the State's value under ``VALUES`` (so a checkpoint pickles it
as it is, no copy at ``pre_save``); the keys changed since the last tick go under ``CHANGED``
at ``pre_save``, so a restored tick-mode task emits them at its next tick.

A key or reduce function that raises, or a key that is not hashable, fails that input tuple
alone, with one log line naming the operator, the function, the error and the element.

With fusion, a count_by_key in "tick" or "final" mode may get (key, count) pairs that a source's
task counted per batch instead of elements (combine.py): told so by ``COMBINED``, it adds each
pair's count.
"""

from __future__ import annotations

from typing import Any

from heron_py.api import api_constants
from heron_py.api.metrics import IMetric
from heron_py.api.state.state import State
from heron_py.api.state.stateful_component import StatefulComponent
from heron_py.api.streamlet.combine import COMBINED, METRIC_BAD, log_bad_element
from heron_py.api.streamlet.components import FUNCTION, OUTPUT_STREAM, StreamletBolt, task_counter
from heron_py.common.config import ReliabilityConfig

KEY_FUNCTION = "key_function"
VALUE_FUNCTION = "value_function"
EMIT = "streamlet.keyed.emit"
TICK_SECS = "streamlet.keyed.tick.secs"
# the State's keys (effectively once)
VALUES = "streamlet.keyed.values"
CHANGED = "streamlet.keyed.changed"

EMIT_UPDATE = "update"
EMIT_TICK = "tick"
EMIT_FINAL = "final"
EMIT_MODES = (EMIT_UPDATE, EMIT_TICK, EMIT_FINAL)
DEFAULT_TICK_SECS = 1.0

# the task's metrics: keys held now, and inputs failed by the user's functions
METRIC_KEYS = "streamlet-keyed-keys"
METRIC_BUCKET_S = 10

_MISSING = object()
_UNHELD: tuple[Any, ...] = ()  # tick mode without acking: a changed key, no inputs held for it


class KeyCountMetric(IMetric):
    """How many keys the task holds (a gauge: read, never reset)."""

    def __init__(self, values: dict[Any, Any]) -> None:
        self.values = values

    def get_value_and_reset(self) -> int:
        return len(self.values)


class _KeyedBolt(StreamletBolt, StatefulComponent):
    """What both operators share: state, modes, ticks, the flush and the error line."""

    _state: State | None = None
    OPERATOR = "reduce_by_key"

    def init_state(self, stateful_state: State) -> None:
        self._state = stateful_state

    def pre_save(self, checkpoint_id: str) -> None:
        """The values dict is already the State's (mutated in place); only the pending keys
        are copied, since the held tuples themselves are not state."""
        if self._state is not None:
            self._state.put(CHANGED, list(self._changed))

    @classmethod
    def where_of(cls, name: str) -> str:
        """How the operator's error lines name streamlet ``name`` (a combiner's too, graph.py)."""
        return f"streamlet '{name}' ({cls.OPERATOR})"

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._where = self.where_of(str(context.get_component_id()))
        self._key_fn = self._load(config, context, KEY_FUNCTION)
        self._mode = str(config.get(EMIT, EMIT_UPDATE))
        if self._mode == EMIT_TICK:
            # the host reads the tick rate after initialize() (as heronpy's window bolts set it)
            config[api_constants.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = str(config.get(TICK_SECS, DEFAULT_TICK_SECS))
        # tick mode holds its inputs until the tick only when they are tracked (at least once):
        # they anchor the tick's output; otherwise each is acked at once and only its key kept
        self._hold_inputs = self._mode == EMIT_TICK and ReliabilityConfig.from_config(config).acking
        state = self._state
        values: dict[Any, Any] | None = state.get(VALUES) if state is not None else None
        if values is None:
            values = {}
            if state is not None:
                state.put(VALUES, values)
        self.values = values
        pending = state.get(CHANGED) if state is not None else None
        # key -> the input tuples that changed it since the last flush (tick mode's anchors)
        self._changed: dict[Any, Any] = {k: [] for k in pending or ()}
        self._register_metrics(context, values)

    def _register_metrics(self, context: Any, values: dict[Any, Any]) -> None:
        """A restore makes a new component with a new context: it registers them again."""
        context.register_metric(METRIC_KEYS, KeyCountMetric(values), METRIC_BUCKET_S)
        self._bad_inputs = task_counter(context, METRIC_BAD)

    def _bad(self, tup: Any, what: str, error: Exception) -> None:
        self._bad_element(tup.values[0], what, error, "failing its source tuple")
        self.fail(tup)

    def _bad_element(self, element: Any, what: str, error: Exception, outcome: str) -> None:
        log_bad_element(self.logger, self._where, what, element, error, outcome)
        self._bad_inputs.incr()

    def _hold(self, key: Any, tup: Any) -> None:
        if not self._hold_inputs:
            self._changed[key] = _UNHELD
            self.ack(tup)
            return
        held = self._changed.get(key)
        if held is None:
            self._changed[key] = [tup]
        else:
            held.append(tup)

    def process_tick(self, tup: Any) -> None:
        if self._mode == EMIT_TICK:
            self.flush_changed()

    def flush_changed(self) -> None:
        """Emits each changed key once with its value, anchored to the inputs that changed it,
        then acks those inputs."""
        changed, self._changed = self._changed, {}
        values = self.values
        for key, held in changed.items():
            self.emit([(key, values[key])], stream=OUTPUT_STREAM, anchors=held)
            for t in held:
                self.ack(t)

    def cleanup(self) -> None:
        """A graceful close (the host flushes what this emits): tick mode's pending keys,
        final mode's every key."""
        if self._mode == EMIT_TICK:
            self.flush_changed()
        elif self._mode == EMIT_FINAL:
            for key, value in self.values.items():
                self.emit([(key, value)], stream=OUTPUT_STREAM)


_FAILED = object()  # a key no user function returns


class CountByKeyBolt(_KeyedBolt):
    """count_by_key: key -> how many inputs had it."""

    OPERATOR = "count_by_key"
    _combined = False

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        super().initialize(config, context)
        # (key, count) pairs from the source's combiner instead of elements (graph.py)
        self._combined = str(config.get(COMBINED, "false")).lower() == "true"  # the plan's config is text
        if self._combined and self._mode == EMIT_UPDATE:
            raise ValueError(f"{self._where}: a combined input needs emit 'tick' or 'final' (update mode emits per "
                             f"element), found emit {self._mode!r}")
        if self._mode == EMIT_TICK:
            self.process = self._process_tick  # type: ignore[method-assign]
        elif self._mode == EMIT_FINAL:
            self.process = self._process_final  # type: ignore[method-assign]

    def process(self, tup: Any) -> None:
        # the per-tuple path: one key call, one dict get and set, the emitted pair
        try:
            key = self._key_fn(tup.values[0])
            n = self.values.get(key, 0) + 1
            self.values[key] = n
        except Exception as e:
            self._bad(tup, "key_function", e)
            return
        self.emit([(key, n)], stream=OUTPUT_STREAM, anchors=[tup])
        self.ack(tup)

    heron_batch_stream = OUTPUT_STREAM

    def heron_process_batch(self, values: list[Any]) -> tuple[list[Any], int]:
        """A batch of untracked inputs (the host calls this only when no tuple of the batch is
        tracked): every key counted in one pass over the batch, no tuple object per input.
        Update mode returns the (key, count) pairs to emit at once; tick mode marks the keys
        changed; final mode only counts. Returns (outputs as one-value tuples, inputs failed)."""
        key_fn, counts, changed = self._key_fn, self.values, self._changed
        get = counts.get
        update, tick = self._mode == EMIT_UPDATE, self._mode == EMIT_TICK
        if self._combined:  # (key, count[, partition]), counted by the source's task (never update mode)
            for row in values:
                c = row[0]
                key, m = c[0], c[1]
                counts[key] = get(key, 0) + m
                if tick and key not in changed:
                    changed[key] = _UNHELD
            return [], 0
        out: list[Any] = []
        append = out.append
        failed = 0
        for row in values:
            try:
                key = key_fn(row[0])
                n = get(key, 0) + 1
                counts[key] = n
            except Exception as e:  # the user's key function, or an unhashable key
                self._bad_element(row[0], "key_function", e, "dropped (its tuple is not tracked)")
                failed += 1
                continue
            if update:
                append(((key, n),))
            elif tick and key not in changed:  # a key already changed keeps the inputs it holds
                changed[key] = _UNHELD
        return out, failed

    def _process_tick(self, tup: Any) -> None:
        key = self._count(tup)
        if key is not _FAILED:
            self._hold(key, tup)

    def _process_final(self, tup: Any) -> None:
        if self._count(tup) is not _FAILED:
            self.ack(tup)

    def _count(self, tup: Any) -> Any:
        """Counts the input's key; its key, or _FAILED when the key function raised (the tuple is failed)."""
        if self._combined:
            c = tup.values[0]
            key, m = c[0], c[1]
            self.values[key] = self.values.get(key, 0) + m
            return key
        try:
            key = self._key_fn(tup.values[0])
            self.values[key] = self.values.get(key, 0) + 1
        except Exception as e:
            self._bad(tup, "key_function", e)
            return _FAILED
        return key


class ReduceByKeyBolt(_KeyedBolt):
    """reduce_by_key: key -> reduce_fn(value so far, value_fn(element)); a key's first value
    is value_fn(element) itself (Heron's ReduceByKeyOperator)."""

    OPERATOR = "reduce_by_key"

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        super().initialize(config, context)
        self._reduce_fn = self._load(config, context, FUNCTION)
        self._value_fn = self._load(config, context, VALUE_FUNCTION) if config.get(VALUE_FUNCTION) else None
        self._tick_or_final = self._mode != EMIT_UPDATE

    def _fold(self, tup: Any) -> tuple[Any, Any]:
        """(the input's key's new value, stored; the key), or (_MISSING, None) after failing
        the input."""
        element = tup.values[0]
        try:
            key = self._key_fn(element)
            old = self.values.get(key, _MISSING)
        except Exception as e:
            self._bad(tup, "key_function", e)
            return _MISSING, None
        try:
            value = element if self._value_fn is None else self._value_fn(element)
            new = value if old is _MISSING else self._reduce_fn(old, value)
        except Exception as e:
            self._bad(tup, "reduce_function" if self._value_fn is None else "value_function or reduce_function",
                      e)
            return _MISSING, None
        self.values[key] = new
        return new, key

    def process(self, tup: Any) -> None:
        new, key = self._fold(tup)
        if new is _MISSING:
            return
        if not self._tick_or_final:
            self.emit([(key, new)], stream=OUTPUT_STREAM, anchors=[tup])
            self.ack(tup)
        elif self._mode == EMIT_TICK:
            self._hold(key, tup)
        else:
            self.ack(tup)

    heron_batch_stream = OUTPUT_STREAM

    def heron_process_batch(self, values: list[Any]) -> tuple[list[Any], int]:
        """A batch of untracked inputs (the host calls this only when no tuple of the batch is
        tracked), folded in one loop with no tuple object per input, as ``process`` folds each:
        update mode returns the (key, new value) pairs to emit, tick mode marks the keys changed,
        final mode only folds. An input a function raises on is logged, counted and dropped.
        Returns (outputs as one-value tuples, inputs failed)."""
        key_fn, reduce_fn, value_fn = self._key_fn, self._reduce_fn, self._value_fn
        store, changed = self.values, self._changed
        get = store.get
        update, tick = self._mode == EMIT_UPDATE, self._mode == EMIT_TICK
        value_what = "reduce_function" if value_fn is None else "value_function or reduce_function"
        out: list[Any] = []
        append = out.append
        failed = 0
        for row in values:
            element = row[0]
            try:
                key = key_fn(element)
                old = get(key, _MISSING)
            except Exception as e:  # the user's key function, or an unhashable key
                self._bad_element(element, "key_function", e, "dropped (its tuple is not tracked)")
                failed += 1
                continue
            try:
                value = element if value_fn is None else value_fn(element)
                new = value if old is _MISSING else reduce_fn(old, value)
            except Exception as e:
                self._bad_element(element, value_what, e, "dropped (its tuple is not tracked)")
                failed += 1
                continue
            store[key] = new
            if update:
                append(((key, new),))
            elif tick and key not in changed:  # a key already changed keeps the inputs it holds
                changed[key] = _UNHELD
        return out, failed
