"""One window of a running topology, per task: what DS2's sizing and Dhalion's detectors read.

Built from what the topology master already serves: per component, the answer of
``/topologies/metrics?component=C&interval=S`` (``{"metrics": {name: {task: value}}}``, a counter
as its increase over the interval), the stream managers' counters per container, the plan's
task placement, and the topology's components as plain data.

Hostile input: a value of a metric read here that is not a finite number, a task id that is not
an integer, a shape that is not the API's, is one ``ObservationError`` saying what, where, what
was expected and what was found (the metrics not read here are not checked). A task whose
report is missing a needed metric, or whose counter went backwards (it restarted inside the
window, so the increase is meaningless), is left out, and the reason is kept in
``TopologyObservation.skipped``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from heron_py.planner.keygroups import DEFAULT_MAX_PARALLELISM, default_max_parallelism
from heron_py.planner.model import GroupingKind

EXECUTE_COUNT = "__execute-count"
EMIT_COUNT = "__emit-count"
BUSY_TIME = "__busy-time-ms"
EXECUTE_LATENCY = "__execute-latency-ms"
TIME_BLOCKED = "__time-blocked-ms"
IN_QUEUE = "__in-queue-batches"
BACKPRESSURE = "__time_spent_back_pressure_ms"
BACKPRESSURE_BY_CAUSE = "__time_spent_back_pressure_by_compid"
# the metrics read: counters (increases over the window; one that went down is a restart) and gauges
COUNTERS = frozenset({EXECUTE_COUNT, EMIT_COUNT, BUSY_TIME, TIME_BLOCKED})
GAUGES = frozenset({EXECUTE_LATENCY, IN_QUEUE})


class ObservationError(ValueError):
    pass


def figure(x: float) -> str:
    """A number in a message: up to 3 decimals, never an exponent (``:g`` writes a wall-clock
    time or a large counter as 1.7e+09)."""
    return f"{x:.3f}".rstrip("0").rstrip(".")


class Delivery(enum.Enum):
    """What a grouping gives a consumer component of each tuple of its stream."""

    ONE_TASK = "one task"  # the component takes the whole stream, its tasks share it
    EVERY_TASK = "every task"  # each task takes the whole stream: more tasks do not share it
    NAMED_TASK = "the task its sender names"  # which component's task, the topology does not say


DELIVERY = {
    GroupingKind.SHUFFLE: Delivery.ONE_TASK, GroupingKind.FIELDS: Delivery.ONE_TASK,
    GroupingKind.LOCAL_OR_SHUFFLE: Delivery.ONE_TASK, GroupingKind.LOWEST: Delivery.ONE_TASK,
    GroupingKind.NONE: Delivery.ONE_TASK, GroupingKind.PARTIAL_KEY: Delivery.ONE_TASK,
    # a custom grouping may choose several tasks for a tuple; read as choosing one
    GroupingKind.CUSTOM: Delivery.ONE_TASK,
    GroupingKind.ALL: Delivery.EVERY_TASK,
    GroupingKind.DIRECT: Delivery.NAMED_TASK,
}


@dataclass(frozen=True)
class InputStream:
    """One subscription of a bolt: a stream of an upstream component, with its grouping."""

    component: str
    stream: str
    grouping: GroupingKind

    @property
    def delivery(self) -> Delivery:
        return DELIVERY[self.grouping]


@dataclass(frozen=True)
class ComponentSpec:
    """A component as the sizing sees it. ``inputs``: the upstream components. ``streams``: what
    it subscribes to of each, stream and grouping; an input without any is one whose streams and
    groupings are not known (a topology given by its component names only)."""

    name: str
    parallelism: int
    inputs: tuple[str, ...]
    is_spout: bool
    max_parallelism: int = DEFAULT_MAX_PARALLELISM
    streams: tuple[InputStream, ...] = ()

    def streams_from(self, upstream: str) -> tuple[InputStream, ...]:
        return tuple(s for s in self.streams if s.component == upstream)


class UsefulTime(enum.Enum):
    """Where a task's useful time came from, best first."""

    BUSY = "__busy-time-ms"
    # the mean since the task started, times this window's count: a fair stand-in while the
    # cost per record holds steady
    LATENCY = "execute count x __execute-latency-ms"
    # a spout has no execute latency; counting all its unblocked time as useful makes its true
    # rate an underestimate, never an overestimate
    UNBLOCKED = "the window less __time-blocked-ms"


@dataclass(frozen=True)
class TaskWindow:
    component: str
    task: int
    seconds: float
    received: tuple[tuple[str, float], ...]  # (upstream component, records it sent this task)
    records_out: float
    useful_ms: float
    useful_from: UsefulTime
    blocked_ms: float
    in_queue: float
    container: int | None = None
    # the same records by stream: (stream, records emitted on it), (upstream, stream, records
    # executed from it); empty when not known (a window written by hand), never partly filled
    emitted: tuple[tuple[str, float], ...] = ()
    executed: tuple[tuple[str, str, float], ...] = ()

    @property
    def records_in(self) -> float:
        return sum(n for _, n in self.received)

    @property
    def useful_fraction(self) -> float:
        return self.useful_ms / (self.seconds * 1000.0)

    @property
    def blocked_fraction(self) -> float:
        return self.blocked_ms / (self.seconds * 1000.0)

    @property
    def true_processing_rate(self) -> float | None:
        """Records in per second of useful time (DS2's λp); None without input or useful time."""
        if self.useful_ms <= 0 or self.records_in <= 0:
            return None
        return self.records_in / (self.useful_ms / 1000.0)

    @property
    def true_output_rate(self) -> float | None:
        """Records out per second of useful time (DS2's λo); None without useful time."""
        return self.records_out / (self.useful_ms / 1000.0) if self.useful_ms > 0 else None


@dataclass(frozen=True)
class ContainerWindow:
    container: int
    seconds: float
    backpressure_ms: float
    # milliseconds a connection spent over its high mark, by what was behind it: a component
    # (its tasks read too slowly) or "stmgr N" (a peer)
    by_cause: tuple[tuple[str, float], ...] = ()

    @property
    def backpressure_fraction(self) -> float:
        return min(1.0, self.backpressure_ms / (self.seconds * 1000.0))

    def cause_fraction(self, cause: str) -> float:
        return min(1.0, dict(self.by_cause).get(cause, 0.0) / (self.seconds * 1000.0))


@dataclass(frozen=True)
class Skipped:
    component: str
    task: int | None  # None: about the component, or a container's stream manager
    reason: str

    def line(self) -> str:
        return f"{self.component}{'' if self.task is None else f' task {self.task}'}: {self.reason}"


@dataclass(frozen=True)
class TopologyObservation:
    seconds: float
    components: tuple[ComponentSpec, ...]  # sources first: each after all its inputs
    tasks: tuple[TaskWindow, ...]
    containers: tuple[ContainerWindow, ...] = ()
    skipped: tuple[Skipped, ...] = ()

    def spec(self, name: str) -> ComponentSpec:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def tasks_of(self, name: str) -> tuple[TaskWindow, ...]:
        return tuple(t for t in self.tasks if t.component == name)

    def edges(self) -> tuple[tuple[str, str], ...]:
        return tuple((src, c.name) for c in self.components for src in c.inputs)

    def parallelism(self) -> dict[str, int]:
        return {c.name: c.parallelism for c in self.components}

    def container_of(self, task: int) -> int | None:
        return next((t.container for t in self.tasks if t.task == task), None)


def build_observation(components: Any, metrics: Any, seconds: Any, *, stmgrs: Any = None,
                      placement: Any = None) -> TopologyObservation:
    """The observation of one window of ``seconds``.

    ``components``: the topology's components, each ``{"name", "parallelism", "inputs",
    "is_spout"}`` and optionally ``"max_parallelism"``; an input is ``{"component", "stream",
    "grouping"}`` (the grouping as ``GroupingKind`` spells it: shuffle, fields, all, ...), or the
    upstream's name alone when its streams and groupings are not known. ``metrics``: ``{component: answer}``, the
    answer of ``/topologies/metrics`` (or only its ``"metrics"`` part). ``stmgrs``: ``{container:
    {name: value}}``, the stream managers' counters as increases over the window. ``placement``:
    ``{task: container}`` of the current plan; given, only its tasks are read (the master keeps
    the series of tasks an earlier plan had)."""
    window = _as_number(seconds)
    if window is None or window <= 0:
        raise ObservationError(f"observation window: expected a number of seconds > 0, found {seconds!r}")
    specs = parse_components(components)
    where = _placement(placement)
    skipped: list[Skipped] = []
    tasks: list[TaskWindow] = []
    per_component = _metrics_by_component(metrics, specs)
    for spec in specs:
        got = _tasks_of(spec, per_component.get(spec.name, {}), window, where, skipped)
        tasks += got
        if len(got) != spec.parallelism:
            skipped.append(Skipped(spec.name, None, f"{len(got)} of its {spec.parallelism} tasks measured"))
    containers = _containers(stmgrs, window, skipped)
    return TopologyObservation(window, specs, tuple(tasks), containers, tuple(skipped))


def parse_components(raw: Any) -> tuple[ComponentSpec, ...]:
    """The components in an order where each comes after all its inputs."""
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise ObservationError(f"topology components: expected a list of components, found {raw!r}")
    specs = [c if isinstance(c, ComponentSpec) else _component(i, c) for i, c in enumerate(raw, 1)]
    names = [s.name for s in specs]
    for s in specs:
        if names.count(s.name) > 1:
            raise ObservationError(f"topology component {s.name!r}: expected a name used once, "
                                   f"found it {names.count(s.name)} times")
        for src in s.inputs:
            if src not in names:
                raise ObservationError(f"topology component {s.name!r}: inputs: expected components of the "
                                       f"topology ({', '.join(sorted(names))}), found {src!r}")
    return _sources_first(specs)


def _component(index: int, raw: Any) -> ComponentSpec:
    if not isinstance(raw, Mapping):
        raise ObservationError(f"topology component #{index}: expected a mapping with name, parallelism, inputs "
                               f"and is_spout, found {raw!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise ObservationError(f"topology component #{index}: name: expected a non-empty string, found {name!r}")
    where = f"topology component {name!r}"
    parallelism = _as_count(raw.get("parallelism"))
    if parallelism is None:
        raise ObservationError(f"{where}: parallelism: expected an integer >= 1, found {raw.get('parallelism')!r}")
    # unset: the number of key groups the routers use for this parallelism
    keys = _as_count(raw.get("max_parallelism", default_max_parallelism(parallelism)))
    if keys is None:
        raise ObservationError(f"{where}: max_parallelism: expected an integer >= 1, "
                               f"found {raw.get('max_parallelism')!r}")
    spout = raw.get("is_spout")
    if not isinstance(spout, bool):
        raise ObservationError(f"{where}: is_spout: expected true or false, found {spout!r}")
    inputs = raw.get("inputs", [])
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise ObservationError(f"{where}: inputs: expected a list of component names or of "
                               f"{{component, stream, grouping}}, found {inputs!r}")
    if spout and inputs:
        raise ObservationError(f"{where}: inputs: expected none for a spout, found {list(inputs)!r}")
    if not spout and not inputs:
        raise ObservationError(f"{where}: inputs: expected at least one for a bolt, found none")
    streams = [_input_stream(where, i) for i in inputs]
    names = [i.component if isinstance(i, InputStream) else i for i in streams]
    subscribed = tuple(dict.fromkeys(i for i in streams if isinstance(i, InputStream)))
    return ComponentSpec(name, parallelism, tuple(dict.fromkeys(names)), spout, keys, subscribed)


def _input_stream(where: str, raw: Any) -> InputStream | str:
    """An input: an upstream's name alone, or one of its streams with the grouping."""
    if isinstance(raw, str):
        return raw
    if not isinstance(raw, Mapping):
        raise ObservationError(f"{where}: inputs: expected a component name or {{component, stream, grouping}}, "
                               f"found {raw!r}")
    component, stream, grouping = raw.get("component"), raw.get("stream"), raw.get("grouping")
    if not isinstance(component, str) or not component:
        raise ObservationError(f"{where}: inputs: component: expected a non-empty string, found {component!r}")
    if not isinstance(stream, str) or not stream:
        raise ObservationError(f"{where}: inputs: stream of {component}: expected a non-empty string, "
                               f"found {stream!r}")
    kinds = {k.value: k for k in GroupingKind}
    if not isinstance(grouping, str) or grouping not in kinds:
        raise ObservationError(f"{where}: inputs: grouping of {component}/{stream}: expected one of "
                               f"{', '.join(sorted(kinds))}, found {grouping!r}")
    return InputStream(component, stream, kinds[grouping])


def _sources_first(specs: list[ComponentSpec]) -> tuple[ComponentSpec, ...]:
    done: list[ComponentSpec] = []
    placed: set[str] = set()
    todo = list(specs)
    while todo:
        ready = [s for s in todo if all(i in placed for i in s.inputs)]
        if not ready:
            raise ObservationError(f"topology components: expected no cycle, found one among "
                                   f"{', '.join(sorted(s.name for s in todo))}")
        done += ready
        placed.update(s.name for s in ready)
        todo = [s for s in todo if s.name not in placed]
    return tuple(done)


def _as_number(raw: Any) -> float | None:
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        return None
    return float(raw) if math.isfinite(raw) else None


def _as_count(raw: Any) -> int | None:
    x = _as_number(raw)
    return int(x) if x is not None and x == int(x) and x >= 1 else None


def _as_id(raw: Any) -> int | None:
    """A task or container id as the API spells it (a string of digits) or as an int."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
        return int(raw)
    return None


def _placement(raw: Any) -> dict[int, int] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ObservationError(f"task placement: expected a mapping of task id to container, found {raw!r}")
    out = {}
    for task, container in raw.items():
        t, c = _as_id(task), _as_id(container)
        if t is None or c is None:
            raise ObservationError(f"task placement: expected integer task ids and containers, "
                                   f"found {task!r}: {container!r}")
        out[t] = c
    return out


def _metrics_by_component(raw: Any, specs: tuple[ComponentSpec, ...]) -> dict[str, dict[int, dict[str, float]]]:
    """{component: {task: {metric: value}}}, every value checked."""
    if not isinstance(raw, Mapping):
        raise ObservationError(f"metrics: expected a mapping of component to its /topologies/metrics answer, "
                               f"found {raw!r}")
    names = {s.name for s in specs}
    out: dict[str, dict[int, dict[str, float]]] = {}
    for comp, answer in raw.items():
        if comp not in names:
            raise ObservationError(f"metrics: expected components of the topology ({', '.join(sorted(names))}), "
                                   f"found {comp!r}")
        out[comp] = _per_task(comp, answer)
    return out


def _per_task(comp: str, answer: Any) -> dict[int, dict[str, float]]:
    """{task: {metric: value}} of the metrics read here; the others (acks, user metrics, ...)
    are not read, so not checked either."""
    if isinstance(answer, Mapping) and isinstance(answer.get("metrics"), Mapping):
        answer = answer["metrics"]  # the whole answer; else its "metrics" part
    if not isinstance(answer, Mapping):
        raise ObservationError(f"metrics of component {comp!r}: expected the /topologies/metrics answer "
                               f"(metric name -> task id -> value), found {answer!r}")
    out: dict[int, dict[str, float]] = {}
    for name, by_task in answer.items():
        base = str(name).partition("/")[0]
        if base not in COUNTERS and base not in GAUGES:
            continue
        if not isinstance(by_task, Mapping):
            raise ObservationError(f"metrics of component {comp!r}, {name}: expected a mapping of task id to value, "
                                   f"found {by_task!r}")
        for task, value in by_task.items():
            t = _as_id(task)
            if t is None:
                raise ObservationError(f"metrics of component {comp!r}, {name}: expected task ids as integers, "
                                       f"found {task!r}")
            x = _as_number(value)
            if x is None or (x < 0 and base in GAUGES):
                what = "a finite number" if base in COUNTERS else "a finite number >= 0"
                raise ObservationError(f"metrics of component {comp!r} task {t}, {name}: expected {what}, "
                                       f"found {value!r}")
            out.setdefault(t, {})[name] = x
    return out


def _tasks_of(spec: ComponentSpec, reported: dict[int, dict[str, float]], seconds: float,
              placement: dict[int, int] | None, skipped: list[Skipped]) -> list[TaskWindow]:
    out = []
    for task in sorted(reported):
        if placement is not None and task not in placement:
            skipped.append(Skipped(spec.name, task, "not in the current plan"))
            continue
        container = placement.get(task) if placement is not None else None
        window = task_window(spec, task, reported[task], seconds, container)
        if isinstance(window, str):
            skipped.append(Skipped(spec.name, task, window))
        else:
            out.append(window)
    return out


def task_window(spec: ComponentSpec, task: int, values: Mapping[str, float], seconds: float,
                container: int | None = None) -> TaskWindow | str:
    """One task's window, or why it cannot be read (a missing metric, a counter that went
    backwards). ``values``: the task's metrics, each a checked finite number."""
    backwards = sorted(n for n, v in values.items() if v < 0)
    if backwards:
        return f"{backwards[0]} went down by {figure(-values[backwards[0]])} (the task restarted in the window)"
    missing = [n for n in (TIME_BLOCKED, IN_QUEUE) if n not in values]
    if missing:
        return f"no {missing[0]} in its report"
    window_ms = seconds * 1000.0
    blocked = min(values[TIME_BLOCKED], window_ms)  # report times jitter around the window's edges
    executed = _executed(spec, values)
    received = _by_source(spec, executed)
    records_in = sum(n for _, n in received)
    if BUSY_TIME in values:
        useful, source = values[BUSY_TIME], UsefulTime.BUSY
    elif spec.is_spout:
        useful, source = window_ms - blocked, UsefulTime.UNBLOCKED
    elif EXECUTE_LATENCY in values:
        useful, source = records_in * values[EXECUTE_LATENCY], UsefulTime.LATENCY
    else:
        return f"no {BUSY_TIME} and no {EXECUTE_LATENCY} in its report"
    emitted = tuple(sorted((n.partition("/")[2], v) for n, v in values.items() if n.startswith(EMIT_COUNT + "/")))
    return TaskWindow(spec.name, task, seconds, received, sum(v for _, v in emitted), min(useful, window_ms), source,
                      blocked, values[IN_QUEUE], container, emitted, executed)


def _executed(spec: ComponentSpec, values: Mapping[str, float]) -> tuple[tuple[str, str, float], ...]:
    """Records from each input's streams: ``__execute-count/<source>/<stream>``. Tuples from no
    input of the topology (tick tuples, system streams) are not the data the sizing is about,
    and are left out."""
    out = []
    for name, v in values.items():
        base, _, rest = name.partition("/")
        source, _, stream = rest.partition("/")
        if base == EXECUTE_COUNT and source in spec.inputs:
            out.append((source, stream, v))
    return tuple(sorted(out))


def _by_source(spec: ComponentSpec, executed: tuple[tuple[str, str, float], ...]) -> tuple[tuple[str, float], ...]:
    """Records from each input, summed over its streams."""
    by_source = dict.fromkeys(spec.inputs, 0.0)
    for source, _, v in executed:
        by_source[source] += v
    return tuple(by_source.items())


def _containers(raw: Any, seconds: float, skipped: list[Skipped]) -> tuple[ContainerWindow, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, Mapping):
        raise ObservationError(f"stream manager metrics: expected a mapping of container to its counters, "
                               f"found {raw!r}")
    out = []
    for key, counters in raw.items():
        container = _as_id(key)
        if container is None or not isinstance(counters, Mapping):
            raise ObservationError(f"stream manager metrics: expected an integer container and a mapping of its "
                                   f"counters, found {key!r}: {counters!r}")
        values = {}
        for name, value in counters.items():
            if name != BACKPRESSURE and not str(name).startswith(BACKPRESSURE_BY_CAUSE + "/"):
                continue
            x = _as_number(value)
            if x is None:
                raise ObservationError(f"stream manager metrics of container {container}, {name}: expected a finite "
                                       f"number, found {value!r}")
            values[name] = x
        why = _container_unreadable(values)
        if why is not None:
            skipped.append(Skipped(f"stream manager {container}", None, why))
            continue
        causes = tuple(sorted((n.partition("/")[2], v) for n, v in values.items()
                              if n.startswith(BACKPRESSURE_BY_CAUSE + "/")))
        out.append(ContainerWindow(container, seconds, values[BACKPRESSURE], causes))
    return tuple(sorted(out, key=lambda c: c.container))


def _container_unreadable(values: Mapping[str, float]) -> str | None:
    if BACKPRESSURE not in values:
        return f"no {BACKPRESSURE} in its report"
    backwards = sorted(n for n, v in values.items() if v < 0)
    if backwards:
        return f"{backwards[0]} went down by {figure(-values[backwards[0]])} (it restarted in the window)"
    return None
