"""The schedulers by name, and the scheduler a running topology was launched with (from its
record in the state manager), for daemons that must ask it for something (a relaunch)."""

from __future__ import annotations

from pathlib import Path

from heron_py.scheduler.base import Scheduler, SchedulerError
from heron_py.scheduler.kube import KubernetesScheduler, options_from_record
from heron_py.scheduler.local import LocalScheduler
from heron_py.scheduler.slurm import SlurmOptions, SlurmScheduler
from heron_py.state import StateConfig, StateManager

SCHEDULERS: dict[str, type[Scheduler]] = {"local": LocalScheduler, "slurm": SlurmScheduler,
                                          "kubernetes": KubernetesScheduler}


def scheduler_of(topology: str, state: StateManager, home: Path | None, state_config: StateConfig) -> Scheduler:
    info = state.get_scheduler_location(topology) or {}
    kind = str(info.get("scheduler", "local"))
    if kind == "local":
        return LocalScheduler(state, home, state_config, host=str(info.get("host", "127.0.0.1")))
    if kind == "slurm":
        opts = dict(info.get("options", {}))
        return SlurmScheduler(state, home, state_config, SlurmOptions(
            partition=opts.get("partition") or None, time_limit=opts.get("time_limit") or None,
            python=str(opts.get("python", "")), exclusive=bool(opts.get("exclusive", True))))
    if kind == "kubernetes":
        return KubernetesScheduler(state, home, state_config, options_from_record(info))
    raise SchedulerError(f"topology '{topology}' was launched by scheduler {kind!r}; expected one of "
                         f"{', '.join(SCHEDULERS)}")
