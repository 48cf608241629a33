"""The scheduler interface: what the CLI asks of any scheduler (local processes, Slurm jobs,
and later Kubernetes, Nomad, YARN).

A scheduler launches one executor per container (heron_py/scheduler/executor.py) and gives
it the address its daemons bind and advertise; everything after that (plans, routing,
recovery inside a container) is the engine's. What the scheduler recorded for a running
topology lives in the state manager's ``schedulers/NAME`` document, whose ``scheduler``
field names the scheduler, so ``kill slurm NAME`` on a local topology is refused.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar

from heron_py.state import StateConfig, StateManager


class SchedulerError(Exception):
    """A scheduler cannot do what was asked; the message says what, where, and what to do."""


@dataclass(frozen=True)
class ContainerStatus:
    container: int
    state: str  # "running", "pending", "gone" (no longer known to the scheduler), ...
    where: str  # host or node name; "" when not placed
    handle: str  # pid (local) or job id (Slurm)


class Scheduler(abc.ABC):
    kind: ClassVar[str]
    # a cluster scheduler runs containers on other hosts: they share state through ZooKeeper
    cluster: ClassVar[bool] = False

    def __init__(self, state: StateManager) -> None:
        self.state = state

    @classmethod
    def check_tools(cls) -> None:
        """Raises SchedulerError when this scheduler's tools are missing here."""

    @abc.abstractmethod
    def launch(self, name: str, num_containers: int) -> dict[str, Any]:
        """Starts every container's executor; returns (and stores) the scheduler's record."""

    @abc.abstractmethod
    def restart(self, name: str, containers: list[int], num_containers: int, grace_s: float = 10.0) -> None:
        """Stops ``containers`` and starts them again; ``num_containers`` may have changed."""

    @abc.abstractmethod
    def kill(self, name: str, grace_s: float = 10.0) -> list[int]:
        """Stops every container; returns pids that had to be SIGKILLed (where known)."""

    @abc.abstractmethod
    def containers(self, name: str) -> list[ContainerStatus]:
        """Where each container runs, as the scheduler sees it."""

    def packing_changed(self, name: str) -> None:
        """A live rescale stored a new packing and keeps the containers running (their executors
        start and stop the tasks): what the scheduler holds of the packing follows. Nothing to do
        where it holds none (local, Slurm: a container's resources are its host's)."""

    def relaunch(self, name: str, container: int) -> None:
        """Starts a container whose executor vanished (its host died) somewhere that is up."""
        packing = self.state.get_packing_plan(name)
        if packing is None:
            raise SchedulerError(f"relaunch: topology '{name}' has no packing plan in the state manager")
        self.restart(name, [container], packing.num_containers)

    def record(self, name: str) -> dict[str, Any]:
        info = dict(self.state.get_scheduler_location(name) or {})
        found = info.get("scheduler", "local")
        if found != self.kind:
            raise SchedulerError(f"topology '{name}' runs on the {found} scheduler, not {self.kind}; expected "
                                 f"the cluster {found} (heron-py COMMAND {found} {name})")
        return info


def preflight(scheduler: type[Scheduler], state_config: StateConfig) -> None:
    """What must hold before anything of a topology is stored: a cluster scheduler needs a
    state manager every host reaches, and its own tools on this machine."""
    if scheduler.cluster and state_config.kind != "zookeeper":
        raise SchedulerError(f"submit {scheduler.kind}: the localfs state manager keeps the topology's state on "
                             f"this machine only, where the {scheduler.kind} nodes cannot read it; expected "
                             f"--state-manager zookeeper --zk HOST:PORT")
    scheduler.check_tools()
