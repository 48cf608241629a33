"""heronpy's Streamlet: a (potentially unbounded) sequence of elements and the operators that
derive new streamlets from it. Nothing runs here: each operator records a Stage, and
Runner.run compiles the graph into spouts and bolts (heron_py.api.streamlet.graph).

The operators are split over a few classes only to keep each class small; users see one
``Streamlet`` with heronpy's methods.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from heron_py.api.bolt.window_bolt import SlidingWindowBolt
from heron_py.api.stream import Grouping
from heron_py.api.streamlet import components as comp
from heron_py.api.streamlet import functions, groupings, keyed, window_components
from heron_py.api.streamlet.errors import StreamletError
from heron_py.api.streamlet.sink import Sink
from heron_py.api.streamlet.stage import Stage, lowest
from heron_py.api.streamlet.transformoperator import TransformOperator
from heron_py.api.streamlet.windowconfig import WindowConfig
from heron_py.api.streamlet.windowing import JoinType
from heron_py.planner.model import GroupingDef

PARTITIONER = "partitioner"


def _positive_int(where: str, what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StreamletError(f"{where}: {what} must be an integer >= 1, found {value!r}")
    return value


def _window_settings(where: str, window_config: Any) -> dict[str, Any]:
    if not isinstance(window_config, WindowConfig):
        raise StreamletError(f"{where}: window_config must be a WindowConfig (WindowConfig.create_sliding_window"
                             f"(...) or create_tumbling_window(...)), found {type(window_config).__name__}")
    return {SlidingWindowBolt.WINDOW_DURATION_SECS: window_config.duration_secs,
            SlidingWindowBolt.WINDOW_SLIDEINTERVAL_SECS: window_config.slide_secs}


def _by_key(where: str, packed: Any) -> GroupingDef:
    return Grouping.custom(groupings.KeyGrouping(where))


def _by_key_function(where: str, packed: Any) -> GroupingDef:
    return Grouping.custom(groupings.KeyFunctionGrouping(where, packed[keyed.KEY_FUNCTION]))


def _keyed_settings(where: str, emit: Any, tick_secs: Any) -> dict[str, Any]:
    """The keyed operators' plain config: the emit mode and, for "tick", the tick interval."""
    if not isinstance(emit, str) or emit not in keyed.EMIT_MODES:
        raise StreamletError(f"{where}: emit must be one of {', '.join(map(repr, keyed.EMIT_MODES))}, "
                             f"found {emit!r}")
    if emit != keyed.EMIT_TICK:
        if tick_secs is not None:
            raise StreamletError(f"{where}: tick_secs is only for emit='tick', found tick_secs={tick_secs!r} "
                                 f"with emit={emit!r}")
        return {keyed.EMIT: emit}
    secs = keyed.DEFAULT_TICK_SECS if tick_secs is None else tick_secs
    if isinstance(secs, bool) or not isinstance(secs, (int, float)) or not 0 < secs < float("inf"):
        raise StreamletError(f"{where}: tick_secs must be a number of seconds > 0, found {tick_secs!r}")
    return {keyed.EMIT: emit, keyed.TICK_SECS: float(secs)}


def _by_partitioner(where: str, packed: Any) -> GroupingDef:
    return Grouping.custom(groupings.RepartitionGrouping(where, packed[PARTITIONER]))


class _StreamletBase:
    def __init__(self, stage: Stage, parents: tuple[Streamlet, ...] = (), num_partitions: int = 1) -> None:
        self._stage = stage
        self._parents = parents
        self._children: list[Streamlet] = []
        self._name: str | None = None
        self._num_partitions = num_partitions
        for p in parents:
            p._children.append(self)  # type: ignore[arg-type]

    def set_name(self, name: str) -> Streamlet:
        if not isinstance(name, str) or not name:
            raise StreamletError(f"Streamlet.set_name: the name must be a non-empty str, found {name!r}")
        self._name = name
        return self  # type: ignore[return-value]

    def get_name(self) -> str | None:
        """The name set with set_name, or the default one given when the topology is built."""
        return self._name

    def set_num_partitions(self, num_partitions: int) -> Streamlet:
        self._num_partitions = _positive_int(f"Streamlet.set_num_partitions on {self._label()}",
                                             "num_partitions", num_partitions)
        return self  # type: ignore[return-value]

    def get_num_partitions(self) -> int:
        return self._num_partitions

    def _label(self) -> str:
        return f"streamlet '{self._name}'" if self._name else f"a {self._stage.prefix} streamlet"

    def _where(self, op: str) -> str:
        return f"Streamlet.{op}() on {self._label()}"

    def _derive(self, stage: Stage, others: tuple[Streamlet, ...] = (), num_partitions: int | None = None) -> Streamlet:
        parents = (self, *others)
        partitions = self._num_partitions if num_partitions is None else num_partitions
        return Streamlet(stage, parents, partitions)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"Streamlet({self._stage.prefix}, name={self._name!r}, partitions={self._num_partitions})"


class _ElementOps(_StreamletBase):
    """Operators on single elements."""

    def _function_stage(self, op: str, prefix: str, bolt: type, fn: Any, nargs: int = 1) -> Streamlet:
        where = self._where(op)
        functions.check_callable(where, f"{op}_function", fn)
        functions.check_arity(where, f"{op}_function", fn, nargs)
        return self._derive(Stage(prefix, bolt, {comp.FUNCTION: fn}))

    def map(self, map_function: Callable[[Any], Any]) -> Streamlet:
        """Each element → map_function(element)."""
        return self._function_stage("map", "map", comp.MapBolt, map_function)

    def flat_map(self, flatmap_function: Callable[[Any], Any]) -> Streamlet:
        """Each element → every element of flatmap_function(element)."""
        return self._function_stage("flat_map", "flatmap", comp.FlatMapBolt, flatmap_function)

    def filter(self, filter_function: Callable[[Any], Any]) -> Streamlet:
        """The elements for which filter_function(element) is true."""
        return self._function_stage("filter", "filter", comp.FilterBolt, filter_function)

    def transform(self, transform_operator: TransformOperator) -> Streamlet:
        """A TransformOperator sees each input Tuple and emits through its Context."""
        if not isinstance(transform_operator, TransformOperator):
            raise StreamletError(f"{self._where('transform')}: expected a TransformOperator, "
                                 f"found {type(transform_operator).__name__}")
        return self._derive(Stage("transform", comp.TransformBolt, {comp.OPERATOR: transform_operator}))

    def repartition(self, num_partitions: int, repartition_function: Callable[[Any, int], Any] | None = None
                    ) -> Streamlet:
        """The same elements over ``num_partitions`` tasks: shuffled, or sent where
        repartition_function(element, num_partitions) says (an index or a list of them)."""
        where = self._where("repartition")
        n = _positive_int(where, "num_partitions", num_partitions)
        if repartition_function is None:
            return self._derive(Stage("repartition", comp.PassBolt), num_partitions=n)
        functions.check_callable(where, "repartition_function", repartition_function)
        functions.check_arity(where, "repartition_function", repartition_function, 2)
        stage = Stage("repartition", comp.PassBolt, {PARTITIONER: repartition_function}, grouping=_by_partitioner)
        return self._derive(stage, num_partitions=n)

    def clone(self, num_clones: int) -> list[Streamlet]:
        """``num_clones`` streamlets, each with every element of this one."""
        n = _positive_int(self._where("clone"), "num_clones", num_clones)
        return [self.repartition(self.get_num_partitions()) for _ in range(n)]

    def union(self, other_streamlet: Streamlet) -> Streamlet:
        """The elements of this streamlet and of other_streamlet."""
        where = self._where("union")
        if not isinstance(other_streamlet, Streamlet):
            raise StreamletError(f"{where}: expected a Streamlet to union with, found {type(other_streamlet).__name__}")
        if other_streamlet is self:
            raise StreamletError(f"{where}: a streamlet cannot be unioned with itself; clone() it first")
        return self._derive(Stage("union", comp.PassBolt), (other_streamlet,))


class _WindowOps(_ElementOps):
    """Operators over processing-time windows."""

    def reduce_by_window(self, window_config: WindowConfig, reduce_function: Callable[[Any, Any], Any]) -> Streamlet:
        """Per window: (Window, every element reduced with reduce_function). A global reduce:
        one partition (heronpy kept the parent's count and hashed each element as a pair)."""
        where = self._where("reduce_by_window")
        settings = _window_settings(where, window_config)
        functions.check_callable(where, "reduce_function", reduce_function)
        functions.check_arity(where, "reduce_function", reduce_function, 2)
        stage = Stage("reducebywindow", window_components.ReduceByWindowBolt, {comp.FUNCTION: reduce_function},
                      settings, grouping=lowest)
        return self._derive(stage, num_partitions=1)

    def reduce_by_key_and_window(self, window_config: WindowConfig,
                                 reduce_function: Callable[[Any, Any], Any]) -> Streamlet:
        """Elements are (key, value) pairs; per window and key: (KeyedWindow, the values reduced)."""
        where = self._where("reduce_by_key_and_window")
        settings = _window_settings(where, window_config)
        functions.check_callable(where, "reduce_function", reduce_function)
        functions.check_arity(where, "reduce_function", reduce_function, 2)
        stage = Stage("reducebykeyandwindow", window_components.ReduceByKeyAndWindowBolt,
                      {comp.FUNCTION: reduce_function}, settings, grouping=_by_key)
        return self._derive(stage)

    def _join(self, op: str, join_type: JoinType, other: Any, window_config: Any, join_function: Any) -> Streamlet:
        where = self._where(op)
        if not isinstance(other, Streamlet):
            raise StreamletError(f"{where}: expected a Streamlet to join with, found {type(other).__name__}")
        if other is self:
            raise StreamletError(f"{where}: a streamlet cannot be joined with itself; clone() it first")
        settings = {**_window_settings(where, window_config), window_components.JOIN_TYPE: int(join_type)}
        functions.check_callable(where, "join_function", join_function)
        functions.check_arity(where, "join_function", join_function, 2)
        stage = Stage("join", window_components.JoinBolt, {comp.FUNCTION: join_function}, settings, grouping=_by_key)
        return self._derive(stage, (other,))

    def join(self, join_streamlet: Streamlet, window_config: WindowConfig,
             join_function: Callable[[Any, Any], Any]) -> Streamlet:
        """Inner join of (key, value) elements per window: (KeyedWindow, join_function(left, right))."""
        return self._join("join", JoinType.INNER, join_streamlet, window_config, join_function)

    def outer_left_join(self, join_streamlet: Streamlet, window_config: WindowConfig,
                        join_function: Callable[[Any, Any], Any]) -> Streamlet:
        """As join, and a key only on this side gives join_function(left, None)."""
        return self._join("outer_left_join", JoinType.OUTER_LEFT, join_streamlet, window_config, join_function)

    def outer_right_join(self, join_streamlet: Streamlet, window_config: WindowConfig,
                         join_function: Callable[[Any, Any], Any]) -> Streamlet:
        """As join, and a key only on the other side gives join_function(None, right)."""
        return self._join("outer_right_join", JoinType.OUTER_RIGHT, join_streamlet, window_config, join_function)

    def outer_join(self, join_streamlet: Streamlet, window_config: WindowConfig,
                   join_function: Callable[[Any, Any], Any]) -> Streamlet:
        """Both outer joins at once (heronpy refused OUTER in its own check; heron-py runs it)."""
        return self._join("outer_join", JoinType.OUTER, join_streamlet, window_config, join_function)


class _KeyedOps(_WindowOps):
    """Keyed aggregation without a window (Heron's Java reduceByKey and countByKey)."""

    def reduce_by_key(self, key_fn: Callable[[Any], Any], reduce_fn: Callable[[Any, Any], Any], *,
                      value_fn: Callable[[Any], Any] | None = None, emit: str = "update",
                      tick_secs: float | None = None) -> Streamlet:
        """(key, value) pairs: per key_fn(element), the values (value_fn(element), or the element
        itself) reduced with reduce_fn(value so far, value) since the start. The elements are
        partitioned by key, so each key lives in one of this streamlet's partitions.

        emit="update" (Heron's behaviour, the default): (key, new value) after each element.
        emit="tick": the keys changed since the last tick, once each, every ``tick_secs`` seconds
        (default 1) and when the task closes. emit="final": every key once, when the task closes."""
        where = self._where("reduce_by_key")
        functions.check_callable(where, "key_fn", key_fn)
        functions.check_arity(where, "key_fn", key_fn, 1)
        functions.check_callable(where, "reduce_fn", reduce_fn)
        functions.check_arity(where, "reduce_fn", reduce_fn, 2)
        objects: dict[str, Any] = {keyed.KEY_FUNCTION: key_fn, comp.FUNCTION: reduce_fn}
        if value_fn is not None:
            functions.check_callable(where, "value_fn", value_fn)
            functions.check_arity(where, "value_fn", value_fn, 1)
            objects[keyed.VALUE_FUNCTION] = value_fn
        stage = Stage("reducebykey", keyed.ReduceByKeyBolt, objects, _keyed_settings(where, emit, tick_secs),
                      grouping=_by_key_function)
        return self._derive(stage)

    def count_by_key(self, key_fn: Callable[[Any], Any], *, emit: str = "update",
                     tick_secs: float | None = None) -> Streamlet:
        """(key, count) pairs: how many elements had each key_fn(element) since the start; emit
        as for reduce_by_key ("update", the default: after each element)."""
        where = self._where("count_by_key")
        functions.check_callable(where, "key_fn", key_fn)
        functions.check_arity(where, "key_fn", key_fn, 1)
        stage = Stage("countbykey", keyed.CountByKeyBolt, {keyed.KEY_FUNCTION: key_fn},
                      _keyed_settings(where, emit, tick_secs), grouping=_by_key_function)
        return self._derive(stage)


class Streamlet(_KeyedOps):
    """The sinks: they end the graph and return None, as heronpy's."""

    def log(self) -> None:
        """Logs str(element) of every element at INFO in the task's log."""
        self._derive(Stage("log", comp.LogBolt))

    def consume(self, consume_function: Callable[[Any], Any]) -> None:
        """Calls consume_function(element) for every element."""
        where = self._where("consume")
        functions.check_callable(where, "consume_function", consume_function)
        functions.check_arity(where, "consume_function", consume_function, 1)
        self._derive(Stage("consume", comp.ConsumeBolt, {comp.FUNCTION: consume_function}))

    def to_sink(self, sink: Sink) -> None:
        """Hands every element to sink.put (Heron's Java API; heronpy had no to_sink)."""
        if not isinstance(sink, Sink):
            raise StreamletError(f"{self._where('to_sink')}: expected a Sink, found {type(sink).__name__}")
        self._derive(Stage("sink", comp.SinkBolt, {comp.SINK: sink}))
