"""DS2's sizing (Kalavri et al., OSDI'18): each component's parallelism from its true rates.

A task's true processing rate is the records it took in per second of *useful* time (not
waiting for input, not blocked on output), so it is what one task can do, however busy it was.
Walking the graph from the sources, each component's target input is what its upstreams'
target outputs send it, and its parallelism is that input over one task's true rate, rounded
up: one step sizes the whole graph, where growing one bottleneck at a time would find the next
one a step later.

An input's share of its upstream's output follows DS2: the target input of a component is the
sum over its inputs (upstream U, stream S, grouping G) of U's target output on S: U's target
input times its selectivity on S (records emitted on S per record in), which is U's target
output times S's share of what U emitted. It is read from what U *emitted*, never from what the
component *executed*: a component behind a backlog executes less than it is sent, and its share
read from that would shrink its target by its own shortfall, sizing it at the parallelism that
falls behind. By grouping:

- shuffle, fields, local-or-shuffle, global, none, partial key, custom: each tuple of S goes to
  one task of the component, so the component takes all of S, its tasks sharing it. (A custom
  grouping that chooses several tasks for a tuple sends more; a global one sends it all to one
  task, which the diagnosis sees as skew.)
- all: each task takes the whole of S. More tasks do not share that load, they repeat it: the
  input is not what the parallelism is sized by. It takes its part of each task's true rate,
  and the component's other inputs are sized on what is left; a component with no other input,
  or whose tasks cannot keep up with the all-grouped input alone, keeps its parallelism (the
  diagnosis may still call it under- or over-provisioned; resizing it does not help, and the
  sizing's line says why).
- direct: the sender names the task, so which component gets how much of S is the sender's
  choice, not the topology's. The observed share carries over: what the component executed of
  S over what U emitted in all, with the backlog's error above.
- an input whose streams and groupings are not known (a topology given by component names
  only): its observed share likewise, from what the component executed of U's records.

An upstream that emitted nothing in the window gives no data: all of its target output is
counted on each stream, as its selectivity is not known. A stream silent in a window in which
its upstream emitted on others has a share of 0, what it carried: its consumer is sized to one
task within the step. A window without per-stream emit counts (one written by hand) reads as a
single stream.

The sources' target: a configured rate per source component, or "keep up with the input". A
source that ran freely emitted what its input had: its observed rate is the target. One held
back by backpressure (a stream manager over the threshold, or its own time blocked on output
over it) emitted only what the topology let through, so its observed rate says nothing of its
input; its true output rate is what it could read, the target that lets it run at full speed.
That may overshoot a source that reads faster than its input arrives; the scale factor bounds
the step and the next window, run freely, sizes back down to the observed rate.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import mean

from heron_py.elastic.config import AT_LEAST_ONE, UNBOUNDED, PerComponent
from heron_py.elastic.observations import ComponentSpec, Delivery, TaskWindow, TopologyObservation

# a ratio such as 80,000 / 20,000 computed in floating point must not round 4 up to 5
_EPSILON = 1e-9


@dataclass(frozen=True)
class ComponentRates:
    """A component's window, per second. A rate over its tasks is the mean of the tasks that
    reported, times its parallelism: a task that did not report is taken to be like the others."""

    component: str
    parallelism: int
    measured: int  # tasks with a window
    true_rate: float | None  # per task: records in per useful second (λp), the mean over tasks
    true_output_rate: float | None  # per task: records out per useful second (λo)
    input_rate: float
    output_rate: float
    received: tuple[tuple[str, float], ...]  # (upstream, records/s from it)
    emitted: tuple[tuple[str, float], ...] = ()  # (stream, records/s emitted on it)
    executed: tuple[tuple[str, str, float], ...] = ()  # (upstream, stream, records/s from it)

    @property
    def selectivity(self) -> float | None:
        """Records out per record in (λo / λp, summed over the tasks): None without input."""
        return self.output_rate / self.input_rate if self.input_rate > 0 else None

    def stream_share(self, stream: str) -> float:
        """The share of this component's output emitted on ``stream`` (its selectivity on the
        stream over its selectivity): 1 when it emitted nothing, or without per-stream counts."""
        if self.output_rate <= 0 or not self.emitted:
            return 1.0
        return dict(self.emitted).get(stream, 0.0) / self.output_rate

    def received_from(self, upstream: str, stream: str | None = None) -> float:
        """Records/s executed from ``upstream`` (on ``stream`` only, when given)."""
        if stream is None:
            return dict(self.received).get(upstream, 0.0)
        return sum(n for u, s, n in self.executed if u == upstream and s == stream)


def measure(obs: TopologyObservation) -> dict[str, ComponentRates]:
    return {c.name: _rates(c, obs.tasks_of(c.name), obs.seconds) for c in obs.components}


def _rates(spec: ComponentSpec, tasks: tuple[TaskWindow, ...], seconds: float) -> ComponentRates:
    def whole(per_task: list[float]) -> float:
        return mean(per_task) * spec.parallelism / seconds if per_task else 0.0

    true_in = [r for r in (t.true_processing_rate for t in tasks) if r is not None]
    true_out = [r for r in (t.true_output_rate for t in tasks) if r is not None]
    received = tuple((src, whole([dict(t.received).get(src, 0.0) for t in tasks])) for src in spec.inputs)
    streams = sorted({s for t in tasks for s, _ in t.emitted})
    emitted = tuple((s, whole([dict(t.emitted).get(s, 0.0) for t in tasks])) for s in streams)
    edges = sorted({(u, s) for t in tasks for u, s, _ in t.executed})
    executed = tuple((u, s, whole([sum(n for tu, ts, n in t.executed if (tu, ts) == (u, s)) for t in tasks]))
                     for u, s in edges)
    return ComponentRates(spec.name, spec.parallelism, len(tasks), mean(true_in) if true_in else None,
                          mean(true_out) if true_out else None, whole([t.records_in for t in tasks]),
                          whole([t.records_out for t in tasks]), received, emitted, executed)


def throughput(rates: Mapping[str, ComponentRates], obs: TopologyObservation) -> float:
    """Records/s the sources emitted: what the topology got through."""
    return sum(rates[c.name].output_rate for c in obs.components if c.is_spout)


class SourceRule(enum.Enum):
    CONFIGURED = "its configured target"
    OBSERVED = "its observed emit rate, running freely"
    TRUE_RATE = "its true output rate, held back by backpressure"


@dataclass(frozen=True)
class SourceTarget:
    component: str
    rate: float | None  # records/s; None when it cannot be known (held back and never measured)
    rule: SourceRule


def source_targets(obs: TopologyObservation, rates: Mapping[str, ComponentRates],
                   configured: Mapping[str, float], backpressure_threshold: float) -> dict[str, SourceTarget]:
    """Each source's target output rate (see the module's docstring for the rule)."""
    topology_held = any(c.backpressure_fraction > backpressure_threshold for c in obs.containers)
    out = {}
    for spec in (c for c in obs.components if c.is_spout):
        r = rates[spec.name]
        if spec.name in configured:
            out[spec.name] = SourceTarget(spec.name, configured[spec.name], SourceRule.CONFIGURED)
            continue
        tasks = obs.tasks_of(spec.name)
        held = topology_held or any(t.blocked_fraction > backpressure_threshold for t in tasks)
        if not held:
            out[spec.name] = SourceTarget(spec.name, r.output_rate, SourceRule.OBSERVED)
        else:
            rate = r.true_output_rate * spec.parallelism if r.true_output_rate is not None else None
            out[spec.name] = SourceTarget(spec.name, rate, SourceRule.TRUE_RATE)
    return out


@dataclass(frozen=True)
class Limits:
    max_scale_factor: float = 2.0
    min_parallelism: PerComponent = AT_LEAST_ONE
    max_parallelism: PerComponent = UNBOUNDED


class Bound(enum.Enum):
    """What held a component's parallelism away from DS2's figure, if anything."""

    NONE = "DS2's figure"
    STEP = "the max scale factor"
    MIN = "its minimum parallelism"
    MAX = "its maximum parallelism"
    KEY_GROUPS = "its key groups (topology.component.max.parallelism)"
    UNKNOWN = "no rate to size it by"
    SOURCE = "a source keeping up with its input keeps its parallelism"
    ALL_GROUPED = "every task takes its all-grouped input whole, which more tasks do not share"


@dataclass(frozen=True)
class ComponentSize:
    component: str
    current: int
    target_input_rate: float | None  # a source: its target output rate
    target_output_rate: float | None
    true_rate: float | None  # per task: a bolt's λp, a source's λo
    ideal: int | None  # DS2's parallelism, before the limits
    parallelism: int
    bound: Bound
    source: bool = False
    # of the target input, what every task takes whole (its all-grouped inputs), records/s
    each_task_input: float = 0.0

    def line(self) -> str:
        def rate(x: float | None) -> str:
            return "unknown" if x is None else f"{x:,.0f}/s"

        what = "target output" if self.source else "target input"
        each = f" ({rate(self.each_task_input)} of it to every task, all grouped)" if self.each_task_input else ""
        ds2 = "cannot size it" if self.ideal is None else f"asks {self.ideal}"
        held = "" if self.bound is Bound.NONE else f" ({self.bound.value})"
        return (f"{self.component}: {what} {rate(self.target_input_rate)}{each}, one task's true rate "
                f"{rate(self.true_rate)}; DS2 {ds2}; {self.current} -> {self.parallelism}{held}")


@dataclass(frozen=True)
class SizingPlan:
    sizes: tuple[ComponentSize, ...]  # sources first
    sources: tuple[SourceTarget, ...]

    def size_of(self, component: str) -> ComponentSize:
        return next(s for s in self.sizes if s.component == component)

    def changes(self) -> dict[str, int]:
        return {s.component: s.parallelism for s in self.sizes if s.parallelism != s.current}


def ceil_tasks(rate: float, per_task: float) -> int:
    return max(0, math.ceil(rate / per_task - _EPSILON))


def limit(spec: ComponentSpec, ideal: int, limits: Limits) -> tuple[int, Bound]:
    """``ideal`` within the step (at most ``max_scale_factor`` times larger or smaller, and by one
    task at least so a small factor still moves), then within the absolute limits: the
    operator's minimum and maximum, and the component's key groups, which win over everything
    (keyed state cannot be split finer)."""
    current, factor = spec.parallelism, limits.max_scale_factor
    step_hi = max(current + 1, math.floor(current * factor + _EPSILON))
    step_lo = max(1, min(current - 1, math.ceil(current / factor - _EPSILON)))
    p, bound = max(ideal, 1), Bound.NONE
    if p > step_hi:
        p, bound = step_hi, Bound.STEP
    elif p < step_lo:
        p, bound = step_lo, Bound.STEP
    lo, hi = limits.min_parallelism.of(spec.name) or 1, limits.max_parallelism.of(spec.name)
    if p < lo:
        p, bound = lo, Bound.MIN
    if hi is not None and p > hi:
        p, bound = hi, Bound.MAX
    if p > spec.max_parallelism:
        p, bound = spec.max_parallelism, Bound.KEY_GROUPS
    return p, bound


def size(obs: TopologyObservation, sources: Mapping[str, SourceTarget], limits: Limits,
         rates: Mapping[str, ComponentRates] | None = None) -> SizingPlan:
    """DS2's one step for the whole graph, within ``limits``."""
    rates = measure(obs) if rates is None else rates
    target_out: dict[str, float | None] = {}
    sizes = []
    for spec in obs.components:
        r = rates[spec.name]
        if spec.is_spout:
            s = _size_source(spec, r, sources[spec.name], limits)
        else:
            s = _size_bolt(spec, r, _target_input(spec, rates, target_out), limits)
        target_out[spec.name] = s.target_output_rate
        sizes.append(s)
    return SizingPlan(tuple(sizes), tuple(sources[c.name] for c in obs.components if c.is_spout))


@dataclass(frozen=True)
class TargetInput:
    """Records/s a component is to take in: what its tasks share, and what every task takes
    whole (its all-grouped inputs)."""

    shared: float
    each_task: float = 0.0


def _target_input(spec: ComponentSpec, rates: Mapping[str, ComponentRates],
                  target_out: Mapping[str, float | None]) -> TargetInput | None:
    """The sum over the inputs of what each sends this component at its target output (the
    module's docstring gives the share by grouping); None while an upstream's is not known."""
    shared = each_task = 0.0
    me = rates[spec.name]
    for src in spec.inputs:
        out = target_out[src]
        if out is None:
            return None
        up = rates[src]
        streams = spec.streams_from(src)
        if not streams:
            shared += out * _observed_share(me.received_from(src), up.output_rate)
        for s in streams:
            if s.delivery is Delivery.EVERY_TASK:
                each_task += out * up.stream_share(s.stream)
            elif s.delivery is Delivery.NAMED_TASK:
                shared += out * _observed_share(me.received_from(src, s.stream), up.output_rate)
            else:
                shared += out * up.stream_share(s.stream)
    return TargetInput(shared, each_task)


def _observed_share(received: float, sent: float) -> float:
    """What the component executed of an upstream's output: short of its share by the backlog
    between them; an upstream that sent nothing gives no share, and all of it is counted."""
    return received / sent if sent > 0 else 1.0


def _size_source(spec: ComponentSpec, r: ComponentRates, target: SourceTarget, limits: Limits) -> ComponentSize:
    if target.rule is not SourceRule.CONFIGURED or target.rate is None:
        p, bound = limit(spec, spec.parallelism, limits)
        return ComponentSize(spec.name, spec.parallelism, target.rate, target.rate, r.true_output_rate, None, p,
                             Bound.SOURCE if bound is Bound.NONE else bound, source=True)
    return _sized(spec, target.rate, target.rate, r.true_output_rate, limits)


def _size_bolt(spec: ComponentSpec, r: ComponentRates, target: TargetInput | None, limits: Limits) -> ComponentSize:
    if target is None:
        return _sized(spec, None, None, r.true_rate, limits)
    if target.each_task == 0:
        return _sized(spec, target.shared, _output(target.shared, r), r.true_rate, limits)
    return _size_all_grouped(spec, r, target, limits)


def _output(target_in: float, r: ComponentRates) -> float | None:
    if target_in == 0:
        return 0.0
    return None if r.selectivity is None else target_in * r.selectivity


def _size_all_grouped(spec: ComponentSpec, r: ComponentRates, target: TargetInput, limits: Limits) -> ComponentSize:
    """A component with all-grouped input: each task spends ``target.each_task`` of its true rate
    on it whatever the parallelism, and the tasks share the rest of the input with what is left.
    Without other input, or with nothing left, more tasks do not help: it keeps its parallelism."""
    true_rate = r.true_rate
    if true_rate is None or true_rate <= 0:
        ideal, held = None, Bound.UNKNOWN
    elif target.shared == 0 or true_rate <= target.each_task * (1 + _EPSILON):
        ideal, held = None, Bound.ALL_GROUPED
    else:
        ideal, held = ceil_tasks(target.shared, true_rate - target.each_task), Bound.NONE
    p, bound = limit(spec, spec.parallelism if ideal is None else ideal, limits)
    bound = held if bound is Bound.NONE else bound
    total = target.shared + target.each_task * p  # each task takes its whole copy
    return ComponentSize(spec.name, spec.parallelism, total, _output(total, r), true_rate, ideal, p, bound,
                         each_task_input=target.each_task)


def _sized(spec: ComponentSpec, target_in: float | None, target_out: float | None, true_rate: float | None,
           limits: Limits) -> ComponentSize:
    if target_in is not None and target_in == 0:
        ideal: int | None = 1
    elif target_in is None or true_rate is None or true_rate <= 0:
        ideal = None
    else:
        ideal = ceil_tasks(target_in, true_rate)
    if ideal is None:
        p, bound = limit(spec, spec.parallelism, limits)
        bound = Bound.UNKNOWN if bound is Bound.NONE else bound
    else:
        p, bound = limit(spec, ideal, limits)
    return ComponentSize(spec.name, spec.parallelism, target_in, target_out, true_rate, ideal, p, bound,
                         source=spec.is_spout)
