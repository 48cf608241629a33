"""The health manager's decision per interval: Dhalion's loop deciding whether to act, DS2's
sizing deciding how much.

``HealthPolicy.decide(observation, now)`` returns the actions (one ``Scale`` for the whole graph,
a ``RestartContainer``, or a ``NoAction`` saying why) and the diagnoses. The policy keeps its own
record: what it did, and what it must not do again yet.

Its states, as a protocol with whoever carries the actions out:

- READY: it may act. A diagnosis that scaling resolves (under- or over-provisioned), a step the
  scale factor cut short that DS2 still asks to go on with, or, when every source has a
  configured target rate, any size of DS2's that is not the running one, triggers one
  ``Scale``: DS2's sizes for every component at once, less the components it must not move
  (skewed ones, a move that is blacklisted, one against its own diagnosis). A slow instance comes first: its
  container is restarted and nothing is resized in the same step, as the slow task's rates
  would mislead DS2.
- AWAITING_PLAN: after a ``Scale``, until an observation runs the parallelism asked for. A plan
  that has not appeared within the blacklist period is given up, and its moves blacklisted.
- SETTLING: the new plan runs (or a container was restarted); no action until the cooldown has
  passed and a whole window was observed after the plan appeared. Then the action is judged:
  a scale up after which the component is still under-provisioned, with the throughput not
  up by ``MIN_GAIN``, did not help, and scaling that component up is blacklisted for the
  blacklist period (Dhalion's blacklist: a resolver that failed on a diagnosis is not tried
  again at once); a scale down after which it is under-provisioned cut too far, and scaling it
  down is blacklisted; a restart after which its container still has a slow task is too.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from heron_py.elastic.config import AutoscaleConfig
from heron_py.elastic.diagnosis import Diagnosis, Kind, Report, Thresholds, diagnose
from heron_py.elastic.observations import TopologyObservation, figure
from heron_py.elastic.sizing import Bound, Limits, SizingPlan, measure, size, source_targets, throughput

# a scale up that raised the throughput by less than this share did not help
MIN_GAIN = 0.05


class State(enum.Enum):
    READY = "ready"
    AWAITING_PLAN = "awaiting the new plan"
    SETTLING = "settling"


class Move(enum.Enum):
    UP = "up"
    DOWN = "down"
    RESTART = "restart"


@dataclass(frozen=True)
class Scale:
    parallelism: tuple[tuple[str, int], ...]  # the components that change: their new parallelism
    why: str


@dataclass(frozen=True)
class RestartContainer:
    container: int
    why: str


@dataclass(frozen=True)
class NoAction:
    why: str


Action = Scale | RestartContainer | NoAction


@dataclass(frozen=True)
class Decision:
    actions: tuple[Action, ...]
    diagnoses: tuple[Diagnosis, ...]
    state: State  # after the decision
    sizing: SizingPlan | None = None  # DS2's sizes, when it sized


@dataclass(frozen=True)
class Taken:
    """An action the policy took, with what it is judged against."""

    time: float
    action: Scale | RestartContainer
    before: tuple[tuple[str, int], ...]  # the changed components' parallelism before
    throughput: float  # records/s the sources emitted in the window it was decided on
    clamped: tuple[tuple[str, Move], ...] = ()  # steps the scale factor cut short
    # records/s each changed component took in the window it was decided on: a spout emitting
    # freely into a growing backlog shows no gain at the sources when the scale did help
    processed: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Blacklisted:
    target: str  # a component, or "container N"
    move: Move
    until: float
    why: str


class HealthPolicy:
    def __init__(self, config: AutoscaleConfig, thresholds: Thresholds | None = None) -> None:
        self._cfg = config
        self._th = thresholds if thresholds is not None else Thresholds(
            backpressure=config.backpressure_threshold, idle=config.idle_threshold)
        self._limits = Limits(config.max_scale_factor, config.min_parallelism, config.max_parallelism)
        self._state = State.READY
        self._history: list[Taken] = []
        self._blacklist: list[Blacklisted] = []
        self._plan_seen = 0.0  # when the plan of the last action was first observed running
        self._previous: TopologyObservation | None = None
        # the action judged in this decision: a step of it the scale factor cut short may go on
        # now, and only now (later, DS2 is asked afresh, through a diagnosis)
        self._judged: Taken | None = None

    @property
    def state(self) -> State:
        return self._state

    @property
    def history(self) -> tuple[Taken, ...]:
        return tuple(self._history)

    def blacklist(self, now: float) -> tuple[Blacklisted, ...]:
        return tuple(b for b in self._blacklist if b.until > now)

    def decide(self, obs: TopologyObservation, now: float) -> Decision:
        self._cfg.check_components([c.name for c in obs.components], [c.name for c in obs.components if c.is_spout])
        report = diagnose(obs, self._th, self._previous)
        self._previous = obs
        self._blacklist = list(self.blacklist(now))
        if not self._cfg.enabled:
            return self._no(report, "heron_py.autoscale.enabled is false: diagnoses only")
        self._judged = None
        wait = self._settle(obs, now, report)
        if wait is not None:
            return self._no(report, wait)
        restart = self._restart(report)
        if restart is not None:
            self._record(Taken(now, restart, (), throughput(measure(obs), obs)), State.SETTLING, now)
            return Decision((restart,), report.diagnoses, self._state)
        return self._scale(obs, now, report)

    def _no(self, report: Report, why: str, plan: SizingPlan | None = None) -> Decision:
        return Decision((NoAction(why),), report.diagnoses, self._state, plan)

    def _record(self, taken: Taken, state: State, now: float) -> None:
        self._history.append(taken)
        self._state, self._plan_seen = state, now

    def _settle(self, obs: TopologyObservation, now: float, report: Report) -> str | None:
        """Why it must wait, or None once the last action is judged and it may act again."""
        if self._state is State.READY:
            return None
        last = self._history[-1]
        if self._state is State.AWAITING_PLAN:
            wanted = dict(last.action.parallelism) if isinstance(last.action, Scale) else {}
            running = obs.parallelism()
            if any(running.get(c) != p for c, p in wanted.items()):
                if now - last.time < self._cfg.blacklist_secs:
                    return (f"waiting for the new plan ({_plan(wanted)}) asked for at {figure(last.time)}; running: "
                            f"{_plan({c: running.get(c, 0) for c in wanted})}")
                return self._give_up(last, now)
            self._state, self._plan_seen = State.SETTLING, now
        if now < last.time + self._cfg.cooldown_secs:
            return (f"cooldown: {figure(last.time + self._cfg.cooldown_secs - now)} s left of "
                    f"{figure(self._cfg.cooldown_secs)} s after the action at {figure(last.time)}")
        if now - obs.seconds < self._plan_seen:
            return (f"waiting for a whole window after the new plan: this one began at "
                    f"{figure(now - obs.seconds)}, the plan ran from {figure(self._plan_seen)}")
        self._judge(last, obs, report, now)
        self._state, self._judged = State.READY, last
        return None

    def _give_up(self, last: Taken, now: float) -> str:
        why = f"the plan asked for at {figure(last.time)} did not appear within {figure(self._cfg.blacklist_secs)} s"
        before = dict(last.before)
        for comp, p in last.action.parallelism if isinstance(last.action, Scale) else ():
            move = Move.UP if p > before[comp] else Move.DOWN
            self._blacklist.append(Blacklisted(comp, move, now + self._cfg.blacklist_secs, why))
        self._state = State.READY
        return f"{why}: given up"

    def _judge(self, last: Taken, obs: TopologyObservation, report: Report, now: float) -> None:
        until = now + self._cfg.blacklist_secs
        if isinstance(last.action, RestartContainer):
            c = last.action.container
            still = [d for d in report.of(Kind.SLOW_INSTANCE) if d.container == c]
            if still:
                self._blacklist.append(Blacklisted(
                    f"container {c}", Move.RESTART, until,
                    f"restarting container {c} at {figure(last.time)} did not help: {still[0].explanation}"))
            return
        rates = measure(obs)
        after, before, took = throughput(rates, obs), dict(last.before), dict(last.processed)
        for comp, new in last.action.parallelism:
            old, under = before[comp], report.has(Kind.UNDER_PROVISIONED, comp)
            gained = after >= last.throughput * (1 + MIN_GAIN) or (
                comp in took and comp in rates and rates[comp].input_rate >= took[comp] * (1 + MIN_GAIN))
            if new > old and under and not gained:
                self._blacklist.append(Blacklisted(
                    comp, Move.UP, until, f"scaling {comp} up from {old} to {new} at {figure(last.time)} did not help: "
                                          f"it is still under-provisioned, and the throughput went from "
                                          f"{last.throughput:,.0f} to {after:,.0f} records/s"))
            elif new < old and under:
                self._blacklist.append(Blacklisted(
                    comp, Move.DOWN, until, f"scaling {comp} down from {old} to {new} at {figure(last.time)} left it "
                                            f"under-provisioned"))

    def _barred(self, target: str, move: Move) -> Blacklisted | None:
        return next((b for b in self._blacklist if b.target == target and b.move is move), None)

    def _restart(self, report: Report) -> RestartContainer | None:
        for d in report.of(Kind.SLOW_INSTANCE):
            if d.container is not None and self._barred(f"container {d.container}", Move.RESTART) is None:
                return RestartContainer(d.container, d.explanation)
        return None

    def _scale(self, obs: TopologyObservation, now: float, report: Report) -> Decision:
        rates = measure(obs)
        sources = source_targets(obs, rates, dict(self._cfg.target_rates), self._th.backpressure)
        plan = size(obs, sources, self._limits, rates)
        triggers = _triggers(report, plan, self._judged)
        if {c.name for c in obs.components if c.is_spout} <= {n for n, _ in self._cfg.target_rates}:
            # every source has its configured rate: DS2's sizes are the operator's, symptom or not
            triggers.update({s.component: f"{s.component} is sized for the configured target rates"
                             for s in plan.sizes if s.ideal is not None and s.ideal != s.current
                             and s.component not in triggers})
        if not triggers:
            return self._no(report, _quiet(report), plan)
        why = list(triggers.values())
        changes, held = self._changes(plan, report)
        if not changes:
            # what DS2 says of each component a trigger named, so the reason nothing moves is seen
            lines = [plan.size_of(c).line() for c in triggers]
            return self._no(report, "; ".join([*why, *held, *lines]), plan)
        lines = [plan.size_of(c).line() for c in changes]
        scale = Scale(tuple(changes.items()), "; ".join([*why, *lines, *held]))
        clamped = tuple((c, Move.UP if p > plan.size_of(c).current else Move.DOWN) for c, p in changes.items()
                        if plan.size_of(c).bound is Bound.STEP)
        before = tuple((c, plan.size_of(c).current) for c in changes)
        processed = tuple((c, rates[c].input_rate) for c, _ in before if c in rates)
        self._record(Taken(now, scale, before, throughput(rates, obs), clamped, processed), State.AWAITING_PLAN, now)
        return Decision((scale,), report.diagnoses, self._state, plan)

    def _changes(self, plan: SizingPlan, report: Report) -> tuple[dict[str, int], list[str]]:
        """DS2's changes less those it must not make, and why each of those is held."""
        changes, held = {}, []
        for s in plan.sizes:
            if s.parallelism == s.current:
                continue
            move = Move.UP if s.parallelism > s.current else Move.DOWN
            barred = self._barred(s.component, move)
            against = Kind.OVER_PROVISIONED if move is Move.UP else Kind.UNDER_PROVISIONED
            if report.has(Kind.DATA_SKEW, s.component):
                held.append(f"{s.component} keeps {s.current}: its input is skewed, and more tasks do not spread "
                            f"a hot key")
            elif barred is not None:
                held.append(f"{s.component} keeps {s.current}: scaling it {move.value} is blacklisted until "
                            f"{figure(barred.until)} ({barred.why})")
            elif report.has(against, s.component):
                held.append(f"{s.component} keeps {s.current}: DS2 would make it {s.parallelism}, but it is "
                            f"{against.value}")
            else:
                changes[s.component] = s.parallelism
        return changes, held


def _plan(p: dict[str, int]) -> str:
    return ", ".join(f"{c} {n}" for c, n in p.items())


def _triggers(report: Report, plan: SizingPlan, last: Taken | None) -> dict[str, str]:
    """Why to resize, by component: a diagnosis scaling resolves, or a step cut short that DS2
    still asks to go on with."""
    out = {d.component: d.explanation for d in report.diagnoses
           if d.kind in (Kind.UNDER_PROVISIONED, Kind.OVER_PROVISIONED)}
    for comp, move in last.clamped if last is not None else ():
        s = plan.size_of(comp)
        if comp not in out and s.ideal is not None and (
                s.ideal > s.current if move is Move.UP else s.ideal < s.current):
            out[comp] = (f"{comp} goes on toward DS2's {s.ideal} (the last step stopped at {s.current}, "
                         f"{Bound.STEP.value})")
    return out


def _quiet(report: Report) -> str:
    if not report.diagnoses:
        return "no diagnosis: the topology keeps its sizes"
    return "no diagnosis that scaling resolves: " + "; ".join(d.explanation for d in report.diagnoses)

