"""The topology master's rules, pure: which stream manager may register, when a physical plan
is due and which version it gets, what a master that took over continues from, and what the
master reports about the topology. No sockets and no state manager here: stmgrs.py and
main.py do the I/O these decisions call for.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from heron_py.planner.model import PackingPlan, PhysicalPlan, StmgrLocation, TopologyDef, TopologyState


class InstanceInfo(Protocol):
    """What a stream manager reports of one of its instances (pb.InstanceInfo has these)."""

    task_id: int
    pid: int
    ready: bool


# a master's plan versions are its epoch's base plus a sequence number: 2**32 plans per master
EPOCH_BITS = 32


def epoch_base(epoch: int) -> int:
    """The version floor of a master with this epoch (the first master's is 0, as before)."""
    return max(0, epoch - 1) << EPOCH_BITS


class RunStateChange(NamedTuple):
    message: str  # the answer for the CLI
    changed: bool
    push_plan: bool  # a new plan carries the state now (else the next plan will)


@dataclass
class PlanBook:
    name: str  # the topology's name, as the master was started with it
    topology: TopologyDef
    packing: PackingPlan
    stmgrs: dict[int, StmgrLocation] = field(default_factory=dict)  # container -> registered SM
    instances: dict[int, dict[str, Any]] = field(default_factory=dict)  # task -> component, container, pid, ready
    stmgr_metrics: dict[int, dict[str, Any]] = field(default_factory=dict)  # container -> SM's last metrics
    run_state: TopologyState = TopologyState.RUNNING
    version: int = 0  # of the last plan pushed (or of the stored plan a master took over)
    pplan: PhysicalPlan | None = None
    # the newest plan the state manager holds, and why the last write failed (if it did): a
    # master taking over adopts the stored plan's run state, so a state not stored yet is not
    # in effect for good (a deactivate would be undone by a failover)
    stored_version: int = 0
    store_error: str | None = None
    # tasks a live rescale added, not in the packing until its switch (topology_master/rescale.py):
    # their stream managers' reports of them count
    staged: frozenset[int] = frozenset()

    def plan_stored(self, version: int) -> None:
        self.stored_version = max(self.stored_version, version)
        if version >= self.version:
            self.store_error = None

    def plan_store_failed(self, version: int, error: str) -> None:
        if version >= self.stored_version:
            self.store_error = error

    @property
    def complete(self) -> bool:
        """Every container's stream manager has registered."""
        return len(self.stmgrs) == self.packing.num_containers

    @property
    def new_topology(self) -> bool:
        """No plan pushed by this master and none stored by an earlier one: the topology's
        first start, whose first plan waits for its instances (stmgrs.py)."""
        return self.pplan is None and self.stored_version == 0

    def missing_instances(self) -> list[int]:
        """The tasks of the packing plan not connected to their stream manager (as the stream
        managers report), in order."""
        return sorted(t.task_id for t in self.packing.tasks if not self.instances.get(t.task_id, {}).get("pid"))

    def registration_error(self, container: int, active: bool, pid: int) -> str | None:
        """Why a registration must be refused, or None."""
        if not active:
            # an SM that read a stale location: it will find the active master through the state
            return f"topology master pid {pid} is a standby, not the active master"
        if not 0 <= container < self.packing.num_containers:
            return (f"container {container} is not in the packing plan "
                    f"(containers 0..{self.packing.num_containers - 1})")
        return None

    def register(self, loc: StmgrLocation) -> None:
        """A stream manager registered (again, after a restart: its new location replaces the old)."""
        self.stmgrs[loc.container] = loc

    def lost(self, container: int) -> None:
        self.stmgrs.pop(container, None)
        for info in self.instances.values():
            if info.get("container") == container:
                info["ready"] = False

    def update_instances(self, container: int, infos: Iterable[InstanceInfo]) -> None:
        # every task of the container is listed, reported or not: a task not reported is not ready
        for t in self.packing.tasks_in(container):
            self.instances[t.task_id] = {"component": t.component, "container": container, "pid": 0, "ready": False}
        known = {t.task_id for t in self.packing.tasks} | self.staged
        for i in infos:
            if i.task_id in known:  # a task a rescale removed reports until it stops: no longer ours
                self.instances[i.task_id] = {**self.instances.get(i.task_id, {}), "pid": i.pid, "ready": i.ready}

    def switch(self, topology: TopologyDef, packing: PackingPlan) -> None:
        """A live rescale's switch: the next plan has the new definition and packing; the
        removed tasks are forgotten, the added ones are the packing's now."""
        self.topology, self.packing, self.staged = topology, packing, frozenset()
        ids = {t.task_id for t in packing.tasks}
        self.instances = {t: i for t, i in self.instances.items() if t in ids}
        for t in packing.tasks:
            info = self.instances.setdefault(t.task_id, {"pid": 0, "ready": False})
            info["component"], info["container"] = t.component, t.container

    def adopt(self, stored: PhysicalPlan | None, epoch: int = 0) -> None:
        """A master that took over keeps the stored plan's run state and counts versions onward
        from above both the stored plan and its epoch's floor: the stored plan may be older than
        what the previous master pushed (its write failed or had not happened when it died), and
        stream managers ignore a plan not newer than theirs."""
        if stored is not None and stored.version > self.version:
            self.run_state = stored.state
            self.version = stored.version
        if stored is not None:
            self.stored_version = max(self.stored_version, stored.version)
        self.version = max(self.version, epoch_base(epoch))

    def next_plan(self, state: TopologyState | None = None) -> PhysicalPlan:
        """The next version, with the run state (or ``state``: a rescale's drain deactivates the
        spouts for a moment without changing what the topology is set to)."""
        self.version += 1
        self.pplan = PhysicalPlan(
            topology=self.topology,
            packing=self.packing,
            stmgrs=tuple(loc for _, loc in sorted(self.stmgrs.items())),
            state=self.run_state if state is None else state,
            version=self.version,
        )
        return self.pplan

    def set_run_state(self, state: TopologyState) -> RunStateChange:
        """A plan is due only when one was pushed before and every stream manager is there;
        before that, the first plan carries the state."""
        if self.run_state is state:
            return RunStateChange(f"topology '{self.name}' is already {state.value}", False, False)
        self.run_state = state
        return RunStateChange(f"topology '{self.name}' is now {state.value}", True,
                              self.pplan is not None and self.complete)

    def pending_reason(self) -> str | None:
        """Why the run state is not in effect on every stream manager yet, or None when it is:
        in effect means a plan carrying it went to every container's stream manager."""
        missing = [c for c in range(self.packing.num_containers) if c not in self.stmgrs]
        if missing:
            which = ", ".join(str(c) for c in missing)
            if len(missing) == 1:
                return f"the stream manager of container {which} is not registered; the plan goes out when it registers"
            return f"the stream managers of containers {which} are not registered; the plan goes out when they register"
        if self.pplan is None or self.pplan.state is not self.run_state:
            return "no physical plan carrying it was pushed yet"
        if self.stored_version < self.pplan.version:
            why = f" (its write failed: {self.store_error})" if self.store_error else ""
            return (f"plan v{self.pplan.version} carrying it is not in the state manager yet{why}; a master "
                    f"taking over would not keep it")
        return None

    def status(self, *, tmanager: dict[str, Any], auth_failures: int, bad_frames: int,
               metricsmgrs: dict[str, Any]) -> dict[str, Any]:
        """The execution state document (also the CLI's status and the HTTP API's)."""
        return {
            "topology": self.name,
            "state": self.run_state.value,
            "pplan_version": self.pplan.version if self.pplan is not None else 0,
            # the state the stream managers have, and why the wanted one is not in effect (if so)
            "applied_state": self.pplan.state.value if self.pplan is not None and self.complete else None,
            "pending_reason": self.pending_reason(),
            "tmanager": tmanager,
            "stmgrs": {str(c): loc.to_dict() for c, loc in sorted(self.stmgrs.items())},
            "instances": {str(t): i for t, i in sorted(self.instances.items())},
            # the master's own counts plus what every stream manager reported of its own
            "auth_failures": auth_failures + sum(int(m.get("auth_failures", 0)) for m in self.stmgr_metrics.values()),
            "bad_frames": bad_frames + sum(int(m.get("bad_frames", 0)) for m in self.stmgr_metrics.values()),
            "stmgr_metrics": {str(c): m for c, m in sorted(self.stmgr_metrics.items())},
            "metricsmgrs": metricsmgrs,
        }
