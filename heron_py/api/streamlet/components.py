"""The spouts and bolts a Streamlet graph compiles to (module level: the plan pickles them by
reference). Each reads its user function or object from its config in initialize() and emits
one-field tuples on the stream "output", as heronpy's.

The windowed operators are in window_components.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from heron_py.api.bolt.bolt import Bolt
from heron_py.api.spout.spout import Spout
from heron_py.api.state.stateful_component import StatefulComponent
from heron_py.api.stream import Stream
from heron_py.api.streamlet import functions
from heron_py.api.streamlet.context import Context

OUTPUT_STREAM = "output"
OUTPUT_FIELD = "_output_"
# every bolt's config: its parents' component names, in the order the operator was given them
PARENTS = "streamlet.parents"
FUNCTION = "function"  # heronpy's key names
OPERATOR = "operator"
GENERATOR = "generator"
SINK = "sink"


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


class SupplierSpout(StreamletSpout):
    """Emits what a function returns, once per call (None included, as heronpy)."""

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._supplier = functions.unpack(config, FUNCTION, str(context.get_component_id()))

    def next_tuple(self) -> None:
        self.emit([self._supplier()], stream=OUTPUT_STREAM)


class GeneratorSpout(StreamletSpout, StatefulComponent):
    """Emits what a Generator's get() returns, skipping None."""

    _state: Any = None

    def init_state(self, stateful_state: Any) -> None:
        self._state = stateful_state

    def pre_save(self, checkpoint_id: str) -> None:
        """The Generator keeps its state in the State object itself."""

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._generator = functions.unpack(config, GENERATOR, str(context.get_component_id()))
        self._generator.setup(ContextImpl(context, self._state, self))

    def next_tuple(self) -> None:
        value = self._generator.get()
        if value is not None:
            self.emit([value], stream=OUTPUT_STREAM)


class MapBolt(StreamletBolt):
    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._fn = self._load(config, context, FUNCTION)

    def process(self, tup: Any) -> None:
        self.emit([self._fn(tup.values[0])], stream=OUTPUT_STREAM)
        self.ack(tup)


class FlatMapBolt(StreamletBolt):
    """Emits each element of an iterable result, or the result itself when it is not iterable
    (heronpy's rule: a returned str is iterable, so it is emitted character by character)."""

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._fn = self._load(config, context, FUNCTION)

    def process(self, tup: Any) -> None:
        result = self._fn(tup.values[0])
        for value in (result if isinstance(result, Iterable) else [result]):
            self.emit([value], stream=OUTPUT_STREAM)
        self.ack(tup)


class FilterBolt(StreamletBolt):
    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._fn = self._load(config, context, FUNCTION)

    def process(self, tup: Any) -> None:
        if self._fn(tup.values[0]):
            self.emit([tup.values[0]], stream=OUTPUT_STREAM)
        self.ack(tup)


class PassBolt(StreamletBolt):
    """Forwards every element: repartition, clone and union (the grouping does the work)."""

    def process(self, tup: Any) -> None:
        self.emit([tup.values[0]], stream=OUTPUT_STREAM)
        self.ack(tup)


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


class LogBolt(StreamletBolt):
    """Logs str(element) at INFO, one line each, in the task's log (heronpy's log())."""

    outputs = []

    def process(self, tup: Any) -> None:
        self.logger.info(str(tup.values[0]))
        self.ack(tup)


class ConsumeBolt(StreamletBolt):
    outputs = []

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._fn = self._load(config, context, FUNCTION)

    def process(self, tup: Any) -> None:
        self._fn(tup.values[0])
        self.ack(tup)


class SinkBolt(StreamletBolt):
    outputs = []

    def initialize(self, config: dict[str, Any], context: Any) -> None:
        self._sink = self._load(config, context, SINK)
        self._sink.setup(ContextImpl(context, None, self))

    def process(self, tup: Any) -> None:
        self._sink.put(tup.values[0])
        self.ack(tup)

    def cleanup(self) -> None:
        """The host calls a bolt's cleanup when the task closes: the sink's cleanup goes with it."""
        self._sink.cleanup()
