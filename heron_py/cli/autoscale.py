"""``heron-py autoscale [CLUSTER] NAME``: the health manager, which watches a running topology
and resizes it (heron_py/elastic/: Dhalion's loop decides whether to act, DS2's model how much).

Every interval it observes a window of the topology's metrics through the master's HTTP API
(each component's tasks, the stream managers' backpressure times, the running plan), asks the
policy, carries out what the policy decides (``Scale``: ``heron-py update``'s
``update_topology``; ``RestartContainer``: ``restart_topology`` of that container) and records
the step (diagnoses, DS2's sizing, the action and its outcome) as a JSON line in the topology's
logs folder, ``logs/autoscale.jsonl`` (heron_py/cli/autoscale_log.py), which the master's web
page shows and the metrics manager of container 0 exports to Prometheus. An action that fails is
recorded with its error and the policy is told nothing happened: it decides on a copy of
itself, kept only once the action took effect.

``--dry-run`` observes once, says what it would do and why, and acts on nothing, whether or not
``heron_py.autoscale.enabled`` is on; with it off, the loop only reports its diagnoses.

Why a process outside the containers: a rescale the master cannot take live restarts every
container, and a slow instance's remedy restarts its container, so a health manager inside one,
beside the master in container 0 say, could be killed by its own action, midway through waiting
for the new plan, and would lose its cooldown and blacklist with it. Run here, it outlives the
restarts it causes. Ctrl-C or SIGTERM stops it once the step under way is over (a second one at
once).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from types import FrameType
from typing import TYPE_CHECKING, Any

from heron_py.cli.autoscale_log import LOG_FILE, AutoscaleLog, entry_lines
from heron_py.common.container_layout import TopologyPaths
from heron_py.common.metric_names import STMGR_COMPONENT as STMGR

if TYPE_CHECKING:  # imported where used: every heron-py command registers this verb
    from heron_py.elastic.config import AutoscaleConfig
    from heron_py.elastic.observations import TopologyObservation
    from heron_py.elastic.policy import Action, Decision, HealthPolicy, RestartContainer, Scale
    from heron_py.elastic.sizing import SizingPlan
    from heron_py.planner.model import TopologyDef
    from heron_py.scheduler.base import Scheduler
    from heron_py.state import StateManager

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a command interrupted


class StepFailed(Exception):
    """An observation or an action that did not happen, in one line."""


class TopologyGone(StepFailed):
    """The topology is no longer in the state manager (killed): the health manager stops."""


Observe = Callable[[], "TopologyObservation"]
Act = Callable[["Scale | RestartContainer"], str]  # what was done, or StepFailed
Record = Callable[[dict[str, Any]], None]


class HealthManager:
    """observe -> decide -> act -> record, every ``config.interval_secs``.

    The policy decides on a copy of itself, kept once its action took effect (or when it took
    none): a failed action leaves the policy as if the step had not happened, so it neither
    waits for a plan that will not come nor judges a move that was never made. ``act`` None is a
    dry run: decisions are recorded, never carried out."""

    def __init__(self, config: AutoscaleConfig, *, observe: Observe, act: Act | None, record: Record,
                 clock: Callable[[], float], sleep: Callable[[float], object]) -> None:
        from heron_py.elastic.policy import HealthPolicy

        self._config = config
        self._policy = HealthPolicy(config)
        self._observe, self._act, self._record = observe, act, record
        self._clock, self._sleep = clock, sleep

    @property
    def policy(self) -> HealthPolicy:
        return self._policy

    def step(self) -> dict[str, Any]:
        from heron_py.elastic.policy import NoAction

        now = self._clock()
        try:
            obs = self._observe()
        except StepFailed as e:
            entry: dict[str, Any] = {"time": now, "decision": "no observation", "error": str(e)}
            if isinstance(e, TopologyGone):
                entry["gone"] = True
            self._record(entry)
            return entry
        draft = copy.deepcopy(self._policy)
        decision = draft.decide(obs, now)
        (action,) = decision.actions
        outcome: dict[str, Any] | None = None
        if isinstance(action, NoAction):
            self._policy = draft
        elif self._act is None:
            outcome = {"dry_run": True}
        else:
            try:
                outcome = {"ok": True, "message": self._act(action)}
                self._policy = draft
            except StepFailed as e:
                outcome = {"ok": False, "error": str(e)}
        sizing = decision.sizing if decision.sizing is not None else sizing_of(obs, self._config)
        entry = step_entry(now, obs, decision, sizing, outcome)
        self._record(entry)
        return entry

    def run(self, stopped: Callable[[], bool], *, once: bool = False) -> dict[str, Any]:
        """Steps every interval until ``stopped()`` (checked after each step and each sleep) or
        the topology is gone; one step with ``once``. Returns the last step's entry.

        An action takes its time out of the interval, but the step after it waits a whole window
        from its end: a window that held the restart of the processes would read their counters
        from their first reports (a master restarted with them keeps nothing older) and see them
        idle. (The policy awaits a window after a new plan appears too; after a restart of a
        container, which changes no plan, only this wait keeps the window clear of it.)"""
        interval, window = self._config.interval_secs, self._config.window_secs
        while True:
            started = self._clock()
            entry = self.step()
            if once or stopped() or entry.get("gone"):
                return entry
            wait = started + interval - self._clock()
            if entry.get("outcome") is not None and not entry["outcome"].get("dry_run"):
                wait = max(wait, window)
            # a clock set back never makes a longer wait
            self._sleep(min(max(interval, window), max(0.0, wait)))
            if stopped():
                return entry


def sizing_of(obs: TopologyObservation, config: AutoscaleConfig) -> SizingPlan:
    """DS2's sizes of the window, as the policy sizes when it may act (a step in its cooldown
    or a restart does not size): what each entry shows."""
    from heron_py.elastic.sizing import Limits, measure, size, source_targets

    rates = measure(obs)
    sources = source_targets(obs, rates, dict(config.target_rates), config.backpressure_threshold)
    return size(obs, sources, Limits(config.max_scale_factor, config.min_parallelism, config.max_parallelism), rates)


def step_entry(now: float, obs: TopologyObservation, decision: Decision, sizing: SizingPlan,
               outcome: dict[str, Any] | None) -> dict[str, Any]:
    """One step as JSON-able data: the line of logs/autoscale.jsonl."""
    from heron_py.elastic.sizing import measure, throughput

    (action,) = decision.actions
    doc = _action_doc(action)
    return {
        "time": now, "window_secs": obs.seconds, "parallelism": obs.parallelism(),
        "throughput": throughput(measure(obs), obs), "decision": doc["kind"], "state": decision.state.value,
        "diagnoses": [{"kind": d.kind.value, "component": d.component, "task": d.task, "container": d.container,
                       "explanation": d.explanation} for d in decision.diagnoses],
        "sizing": [{"component": s.component, "current": s.current, "target": s.parallelism, "ideal": s.ideal,
                    "bound": s.bound.value, "target_rate": s.target_input_rate, "true_rate": s.true_rate,
                    "line": s.line()} for s in sizing.sizes],
        "action": doc, "outcome": outcome, "skipped": [s.line() for s in obs.skipped],
    }


def _action_doc(action: Action) -> dict[str, Any]:
    from heron_py.elastic.policy import RestartContainer, Scale

    if isinstance(action, Scale):
        return {"kind": "scale", "parallelism": dict(action.parallelism), "why": action.why}
    if isinstance(action, RestartContainer):
        return {"kind": "restart", "container": action.container, "why": action.why}
    return {"kind": "none", "why": action.why}


# --- observing: the master's HTTP API as the policy's observation ---

def observation_from(topo: TopologyDef, plan: Mapping[str, Any], answers: Mapping[str, Any], stmgrs: Any,
                     window: float) -> TopologyObservation:
    """The observation of a window from the master's answers: ``plan`` (/topologies/physicalplan:
    the running plan's tasks per component and where each runs), ``answers`` (per component, its
    /topologies/metrics), ``stmgrs`` (/topologies/metrics of STMGR). The running plan's
    parallelism is the observed one: the stored topology is the one asked for, ahead of it
    while an update is under way. Each input goes with its stream and grouping: the sizing
    reads an upstream's share of its output by stream, and by how the grouping delivers it."""
    from heron_py.elastic.observations import build_observation
    from heron_py.planner.keygroups import max_parallelism
    from heron_py.planner.model import ComponentKind

    running = {**plan.get("spouts", {}), **plan.get("bolts", {})}
    components = [{"name": c.name, "parallelism": len(running.get(c.name, ())) or c.par,
                   "inputs": [{"component": i.component, "stream": i.stream, "grouping": i.grouping.kind.value}
                              for i in c.inputs], "is_spout": c.kind is ComponentKind.SPOUT,
                   "max_parallelism": max_parallelism(topo.config, c.config, c.par)} for c in topo.components]
    tasks = {str(t) for ids in running.values() for t in ids}
    placement = {t: i["container"] for t, i in plan.get("instances", {}).items()
                 if t in tasks and isinstance(i, Mapping) and "container" in i}
    per_container: dict[str, dict[str, Any]] = {}
    metrics = stmgrs.get("metrics", {}) if isinstance(stmgrs, Mapping) else {}
    for name, by_container in metrics.items() if isinstance(metrics, Mapping) else ():
        for container, value in by_container.items() if isinstance(by_container, Mapping) else ():
            per_container.setdefault(container, {})[name] = value
    return build_observation(components, answers, window, stmgrs=per_container, placement=placement)


def observe_topology(state: StateManager, name: str, window: float) -> TopologyObservation:
    """One window of the running topology, from its master; StepFailed if it cannot be had."""
    from heron_py.cli.admin import tm_get
    from heron_py.cli.errors import AdminError
    from heron_py.elastic.observations import ObservationError
    from heron_py.state import StateManagerError

    try:
        topo = state.get_topology(name)
        if topo is None:
            raise TopologyGone(f"topology '{name}' is not in the state manager any more (killed)")
        plan = tm_get(state, name, "/topologies/physicalplan")
        answers = {c.name: tm_get(state, name, "/topologies/metrics", {"component": c.name, "interval": window})
                   for c in topo.components}
        stmgrs = tm_get(state, name, "/topologies/metrics", {"component": STMGR, "interval": window})
        return observation_from(topo, plan, answers, stmgrs, window)
    except (AdminError, StateManagerError, ObservationError) as e:
        raise StepFailed(f"observing topology '{name}': {e}") from None


# --- acting ---

def carry_out(state: StateManager, sched: Scheduler, name: str, wait_s: float, action: Scale | RestartContainer) -> str:
    """``heron-py update`` for a Scale, ``heron-py restart NAME K`` for a RestartContainer; what
    was done, or StepFailed with the command's one line."""
    from heron_py.cli.errors import AdminError, SubmitError
    from heron_py.cli.lifecycle import restart_topology, update_topology
    from heron_py.elastic.policy import Scale
    from heron_py.planner.errors import TopologyError
    from heron_py.scheduler.base import SchedulerError
    from heron_py.state import StateManagerError

    try:
        if isinstance(action, Scale):
            return "updated: " + update_topology(state, sched, name, dict(action.parallelism), wait_s=wait_s)
        restart_topology(state, sched, name, action.container, wait_s=wait_s)
        return f"restarted container {action.container}"
    except (SubmitError, AdminError, SchedulerError, StateManagerError, TopologyError) as e:
        raise StepFailed(str(e)) from None


# --- the verb ---

def add_parser(add_parser: Callable[..., argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Registers the verb with the ``add_parser(name, **kw)`` helper of heron_py/cli/main.py."""
    from heron_py.cli.main import _cluster_arg, _name_arg

    p = add_parser("autoscale", help="the health manager: watch a running topology and resize it from its "
                                     "metrics (runs until Ctrl-C)")
    _cluster_arg(p)
    _name_arg(p)
    p.add_argument("--dry-run", action="store_true",
                   help="observe now, decide once and say what it would do and why; act on nothing")
    p.add_argument("--once", action="store_true",
                   help="one step (observe, decide, act, record), then exit (1 if it could not observe or its action "
                        "failed)")
    p.add_argument("--interval", type=_seconds, default=None, metavar="S",
                   help="seconds between two decisions (default: heron_py.autoscale.interval.secs)")
    p.add_argument("--window", type=_seconds, default=None, metavar="S",
                   help="seconds of metrics each decision reads (default: heron_py.autoscale.window.secs)")
    p.add_argument("--wait", type=_seconds, default=60.0, metavar="SECONDS",
                   help="how long an action waits for every task to run again")
    p.set_defaults(fn=cmd_autoscale)
    return p


def _seconds(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        x = float("nan")
    if not x > 0 or x == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, found {text!r}")
    return x


def settings(topo: TopologyDef, interval: float | None, window: float | None) -> AutoscaleConfig:
    """The topology's ``heron_py.autoscale.*`` settings, the command line's interval and window
    over them; a bad one is SubmitError's one line."""
    from heron_py.cli.errors import SubmitError
    from heron_py.cli.submit import check_autoscale
    from heron_py.planner.errors import TopologyError

    try:
        config = check_autoscale(topo)
    except TopologyError as e:
        raise SubmitError(f"autoscale: {e}") from None
    return replace(config, interval_secs=interval or config.interval_secs, window_secs=window or config.window_secs)


def _print(entry: Mapping[str, Any]) -> None:
    print("\n".join(entry_lines(entry)), flush=True)


def cmd_autoscale(args: argparse.Namespace) -> int:
    from heron_py.cli.main import _require, _scheduler_for, _state

    state = _state(args)
    _require(state, args.name)
    topo = state.get_topology(args.name)
    assert topo is not None
    config = settings(topo, args.interval, args.window)

    def observe() -> TopologyObservation:
        return observe_topology(state, args.name, config.window_secs)

    if args.dry_run:
        print(f"topology '{args.name}': dry run over the last {config.window_secs:g} s; nothing is carried out")
        entry = HealthManager(replace(config, enabled=True), observe=observe, act=None, record=_print,
                              clock=time.time, sleep=time.sleep).step()
        return 1 if entry["decision"] == "no observation" else 0
    return _loop(args, state, _scheduler_for(args, args.name), topo, config, observe)


def _loop(args: argparse.Namespace, state: StateManager, sched: Scheduler, topo: TopologyDef,
          config: AutoscaleConfig, observe: Observe) -> int:
    from heron_py.common.config import LogCaps

    paths = TopologyPaths.of(args.name)
    log = AutoscaleLog(paths.private(paths.logs) / LOG_FILE, LogCaps.from_config(topo.config))

    def act(action: Scale | RestartContainer) -> str:
        return carry_out(state, sched, args.name, args.wait, action)

    def record(entry: dict[str, Any]) -> None:
        _print(entry)
        try:
            log.append(entry)
        except OSError as e:  # a full disk stops the record, not the health manager: it was printed
            print(f"heron-py autoscale: warning: cannot record to {log.path}: {e.strerror or e}", file=sys.stderr)

    mode = "acts on its decisions" if config.enabled else "reports only (heron_py.autoscale.enabled is false)"
    print(f"topology '{args.name}': health manager every {config.interval_secs:g} s over "
          f"{config.window_secs:g} s windows; {mode}; recording to {log.path}", flush=True)
    try:
        with _stop_on_signals() as stop:
            entry = HealthManager(config, observe=observe, act=act, record=record, clock=time.time,
                                  sleep=stop.wait).run(stop.is_set, once=args.once)
    except KeyboardInterrupt:  # the second Ctrl-C or SIGTERM: no traceback
        print("heron-py autoscale: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    failed = entry["decision"] == "no observation" or (entry.get("outcome") or {}).get("ok") is False
    return 1 if args.once and failed else 0


@contextlib.contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """SIGINT and SIGTERM set the event (the loop ends after its step); a second one interrupts
    at once. SIGINT explicitly: a shell starting a command in the background without job
    control starts it with SIGINT ignored."""
    stop = threading.Event()

    def handler(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print(f"heron-py autoscale: {signal.Signals(signum).name}: stopping after this step", flush=True)

    before = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for s, h in before.items():
            signal.signal(s, h)
