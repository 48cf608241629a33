"""Heron's per-component output rate (``topology.component.output.bps``), as its stream manager
applies it: the component's rate is split evenly over its tasks, and the stream manager stops
reading a local task's connection while that task is over its rate. The task then blocks on its
full outbound queue, as under backpressure, so a spout that emits flat out is paced at its source
(no tuple is dropped, and nothing spins).

Pure logic: the buckets and the rates of a plan. The stream manager's instance connections
(``instances.LocalInstances``) pause and resume the reading; the caller passes the clock."""

from __future__ import annotations

from dataclasses import dataclass

from heron_py.common.config import ConfigError, output_bps
from heron_py.planner.model import PhysicalPlan

# Heron's burst: one and a half times the rate (InstanceServer::SetRateLimit)
BURST = 1.5


@dataclass
class TokenBucket:
    """Bytes a task may still send now; what it sends beyond that is a debt that its reading
    waits out. The frame that crosses the line was read already: it is counted, not refused."""

    rate: float  # bytes per second
    burst: float  # the most that may accumulate while the task is quiet
    tokens: float
    stamp: float  # the clock at the last refill

    @classmethod
    def full(cls, rate: float, now: float) -> TokenBucket:
        return cls(rate, rate * BURST, rate * BURST, now)

    def take(self, nbytes: int, now: float) -> float:
        """Counts ``nbytes`` read at ``now``; the seconds until the bucket is out of debt (0: none)."""
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate) - nbytes
        self.stamp = now
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate


def output_rates(plan: PhysicalPlan, container: int) -> dict[int, float]:
    """Each local task's bytes per second under ``topology.component.output.bps`` (the component's
    config over the topology's), for the tasks of the components that have a limit. A value the
    submit would have refused (a plan written by hand) raises ConfigError naming the component."""
    rates: dict[int, float] = {}
    topo = plan.topology
    local = [t for t in plan.packing.tasks if t.container == container]
    for comp in topo.components:
        try:
            bps = output_bps({**topo.config, **comp.config})
        except ConfigError as e:
            raise ConfigError(f"component '{comp.name}': {e}") from None
        if bps is None:
            continue
        for t in local:
            if t.component == comp.name:
                rates[t.task_id] = bps / max(1, comp.par)
    return rates
