"""The schedulers by name, and the scheduler a running topology was launched with (from its
record in the state manager), for daemons that must ask it for something (a relaunch)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from heron_py.scheduler.base import Scheduler, SchedulerError

if TYPE_CHECKING:
    from heron_py.state import StateConfig, StateManager

# the schedulers by name; each module is imported only when its scheduler is asked for (the CLI's
# submit names one, and the Kubernetes one brings the kubernetes client's configuration code)
KINDS = ("local", "slurm", "kubernetes")


def scheduler_class(kind: str) -> type[Scheduler]:
    """The scheduler named ``kind``, one of KINDS."""
    if kind not in KINDS:
        raise SchedulerError(f"unknown scheduler {kind!r}; expected one of {', '.join(KINDS)}")
    if kind == "kubernetes":
        from heron_py.scheduler.kube import KubernetesScheduler

        return KubernetesScheduler
    if kind == "slurm":
        from heron_py.scheduler.slurm import SlurmScheduler

        return SlurmScheduler
    from heron_py.scheduler.local import LocalScheduler

    return LocalScheduler


def scheduler_of(topology: str, state: StateManager, home: Path | None, state_config: StateConfig) -> Scheduler:
    info = state.get_scheduler_location(topology) or {}
    kind = str(info.get("scheduler", "local"))
    if kind not in KINDS:
        raise SchedulerError(f"topology '{topology}' was launched by scheduler {kind!r}; expected one of "
                             f"{', '.join(KINDS)}")
    if kind == "slurm":
        from heron_py.scheduler.slurm import SlurmOptions, SlurmScheduler

        opts = dict(info.get("options", {}))
        return SlurmScheduler(state, home, state_config, SlurmOptions(
            partition=opts.get("partition") or None, time_limit=opts.get("time_limit") or None,
            python=str(opts.get("python", "")), exclusive=bool(opts.get("exclusive", True))))
    if kind == "kubernetes":
        from heron_py.scheduler.kube import KubernetesScheduler, options_from_record

        return KubernetesScheduler(state, home, state_config, options_from_record(info))
    from heron_py.scheduler.local import LocalScheduler

    return LocalScheduler(state, home, state_config, host=str(info.get("host", "127.0.0.1")))
