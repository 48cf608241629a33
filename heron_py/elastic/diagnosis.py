"""Dhalion's detectors and diagnosers (Floratou et al., VLDB'17), on one window.

Detectors find symptoms, each a fact with its figures: a stream manager in backpressure, a
task with input pending, a task much slower than its peers on similar input, a task fed much
more than its peers. Diagnosers explain the symptoms together:

- backpressure (or pending input) behind a component whose tasks are alike is
  UNDER_PROVISIONED: more tasks would take the load;
- behind a component with one slow task it is SLOW_INSTANCE: that task's host or process is at
  fault, and restarting its container (elsewhere, fresh) is the cure, not more tasks;
- behind a component with one task fed far more than the others it is DATA_SKEW: the keys'
  distribution, which more tasks do not spread (reported only);
- a component all of whose tasks were mostly idle, in a topology without backpressure, is
  OVER_PROVISIONED.

Each diagnosis carries one line with the figures that led to it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from statistics import median

from heron_py.elastic.observations import TaskWindow, TopologyObservation


@dataclass(frozen=True)
class Thresholds:
    backpressure: float = 0.1  # share of the window; above it, a symptom
    idle: float = 0.3  # useful share of the window; below it for every task, idle
    # the default inbound queue holds 64 batches (heron_py.instance.inbound.queue.batches): over
    # half of it is input arriving faster than the task takes it
    pending_batches: float = 32.0
    slow_ratio: float = 0.5  # a task below this share of its peers' median true rate is slow...
    similar_input: float = 0.25  # ...if its input is within this share of theirs
    skew_ratio: float = 2.0  # a task fed at least this many times its peers' median is skewed
    # below this many records in a window, a task's rates and shares are noise
    min_records: float = 100.0


class SymptomKind(enum.Enum):
    BACKPRESSURE = "backpressure"
    PENDING = "pending input"
    SLOW_TASK = "slow task"
    SKEW = "skewed input"


@dataclass(frozen=True)
class Symptom:
    kind: SymptomKind
    line: str
    component: str | None = None  # None: a stream manager's
    task: int | None = None
    container: int | None = None
    causes: tuple[str, ...] = ()  # backpressure: the components behind it


class Kind(enum.Enum):
    UNDER_PROVISIONED = "under-provisioned"
    OVER_PROVISIONED = "over-provisioned"
    SLOW_INSTANCE = "slow instance"
    DATA_SKEW = "data skew"


@dataclass(frozen=True)
class Diagnosis:
    kind: Kind
    component: str
    explanation: str
    task: int | None = None
    container: int | None = None


@dataclass(frozen=True)
class Report:
    symptoms: tuple[Symptom, ...]
    diagnoses: tuple[Diagnosis, ...]

    def of(self, kind: Kind) -> tuple[Diagnosis, ...]:
        return tuple(d for d in self.diagnoses if d.kind is kind)

    def has(self, kind: Kind, component: str) -> bool:
        return any(d.kind is kind and d.component == component for d in self.diagnoses)


def _pct(x: float) -> str:
    return f"{x:.0%}"


def detect_backpressure(obs: TopologyObservation, th: Thresholds) -> list[Symptom]:
    names = {c.name for c in obs.components}
    out = []
    for c in obs.containers:
        if c.backpressure_fraction <= th.backpressure:
            continue
        causes = tuple(n for n, _ in c.by_cause if n in names and c.cause_fraction(n) > th.backpressure)
        behind = "; behind it: " + ", ".join(f"{n} {_pct(c.cause_fraction(n))}" for n in causes) if causes else ""
        out.append(Symptom(SymptomKind.BACKPRESSURE,
                           f"stream manager {c.container} was in backpressure {_pct(c.backpressure_fraction)} of "
                           f"the {obs.seconds:g} s window (threshold {_pct(th.backpressure)}){behind}",
                           container=c.container, causes=causes))
    return out


def detect_pending(obs: TopologyObservation, th: Thresholds,
                   previous: TopologyObservation | None = None) -> list[Symptom]:
    """A queue over the mark, or over half of it and longer than in the previous window."""
    before = {(t.component, t.task): t.in_queue for t in previous.tasks} if previous is not None else {}
    spouts = {c.name for c in obs.components if c.is_spout}
    out = []
    # a spout's inbound queue holds acks and control messages, not input
    for t in (t for t in obs.tasks if t.component not in spouts):
        was = before.get((t.component, t.task))
        if t.in_queue > th.pending_batches:
            why = f"over {th.pending_batches:g}"
        elif was is not None and t.in_queue > was and t.in_queue > th.pending_batches / 2:
            why = f"up from {was:g}, over half of {th.pending_batches:g}"
        else:
            continue
        out.append(Symptom(SymptomKind.PENDING, f"task {t.task} of {t.component} has {t.in_queue:g} batches of "
                                                f"input pending ({why})", t.component, t.task, t.container))
    return out


def _by_component(obs: TopologyObservation) -> dict[str, tuple[TaskWindow, ...]]:
    return {c.name: obs.tasks_of(c.name) for c in obs.components if not c.is_spout}


def detect_slow(obs: TopologyObservation, th: Thresholds) -> list[Symptom]:
    out = []
    for comp, tasks in _by_component(obs).items():
        for t in tasks:
            peers = [p for p in tasks if p is not t and p.true_processing_rate is not None]
            rate = t.true_processing_rate
            if not peers or rate is None or t.records_in < th.min_records:
                continue
            peer_rate, peer_in = median(p.true_processing_rate or 0.0 for p in peers), median(
                p.records_in for p in peers)
            if rate < th.slow_ratio * peer_rate and abs(t.records_in - peer_in) <= th.similar_input * peer_in:
                out.append(Symptom(SymptomKind.SLOW_TASK,
                                   f"task {t.task} of {comp} is slow: {rate:,.0f} records/s of useful time against "
                                   f"its peers' median {peer_rate:,.0f} (below {_pct(th.slow_ratio)}) on similar "
                                   f"input ({t.records_in:,.0f} records against {peer_in:,.0f})",
                                   comp, t.task, t.container))
    return out


def detect_skew(obs: TopologyObservation, th: Thresholds) -> list[Symptom]:
    out = []
    for comp, tasks in _by_component(obs).items():
        for t in tasks:
            peers = [p.records_in for p in tasks if p is not t]
            if not peers or t.records_in < th.min_records:
                continue
            peer_in = median(peers)
            if t.records_in >= th.skew_ratio * peer_in:
                times = f"{t.records_in / peer_in:.1f} times " if peer_in > 0 else ""
                out.append(Symptom(SymptomKind.SKEW,
                                   f"task {t.task} of {comp} received {t.records_in:,.0f} records in the "
                                   f"{obs.seconds:g} s window, {times}its peers' median {peer_in:,.0f} "
                                   f"({th.skew_ratio:g} times at most)", comp, t.task, t.container))
    return out


def diagnose(obs: TopologyObservation, th: Thresholds, previous: TopologyObservation | None = None) -> Report:
    pressure, pending = detect_backpressure(obs, th), detect_pending(obs, th, previous)
    slow, skew = detect_slow(obs, th), detect_skew(obs, th)
    out: list[Diagnosis] = []
    for comp, why in _bottlenecks(obs, pressure, pending).items():
        slow_here = [s for s in slow if s.component == comp]
        skewed_here = [s for s in skew if s.component == comp]
        if slow_here:
            out += [Diagnosis(Kind.SLOW_INSTANCE, comp, f"{s.line}; {why}: " + (
                f"restart container {s.container}" if s.container is not None else "its container is unknown"),
                s.task, s.container) for s in slow_here]
        elif not skewed_here:
            shares = ", ".join(_pct(t.useful_fraction) for t in obs.tasks_of(comp))
            out.append(Diagnosis(Kind.UNDER_PROVISIONED, comp,
                                 f"{comp} is under-provisioned: its tasks were busy {shares} of the window; {why}"))
    out += [Diagnosis(Kind.DATA_SKEW, str(s.component), f"{s.line}: more tasks do not spread a hot key", s.task,
                      s.container) for s in skew]
    if not pressure:
        out += _over_provisioned(obs, th, pending)
    return Report(tuple(pressure + pending + slow + skew), tuple(out))


def _bottlenecks(obs: TopologyObservation, pressure: list[Symptom], pending: list[Symptom]) -> dict[str, str]:
    """The components behind the backpressure, as the stream managers name them, else those with
    input pending (a queue fills before its stream manager's buffer does), with why."""
    out: dict[str, str] = {}
    for s in pressure:
        for comp in s.causes:
            out.setdefault(comp, s.line)
    for s in pending:
        if s.component is not None:
            out.setdefault(s.component, s.line)
    return {c.name: out[c.name] for c in obs.components if c.name in out}


def _over_provisioned(obs: TopologyObservation, th: Thresholds, pending: list[Symptom]) -> list[Diagnosis]:
    out = []
    busy_components = {s.component for s in pending}
    for c in obs.components:
        tasks = obs.tasks_of(c.name)
        if c.parallelism < 2 or len(tasks) < c.parallelism or c.name in busy_components:
            continue
        if all(t.useful_fraction < th.idle for t in tasks):
            shares = ", ".join(_pct(t.useful_fraction) for t in tasks)
            out.append(Diagnosis(Kind.OVER_PROVISIONED, c.name,
                                 f"{c.name} is over-provisioned: its {len(tasks)} tasks were busy {shares} of the "
                                 f"{obs.seconds:g} s window (all below {_pct(th.idle)}), without backpressure"))
    return out
