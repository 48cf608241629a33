"""Which containers the topology master asks its scheduler to relaunch (Heron gave this job
to its health manager). Pure, with an injected clock.

A container is alive while its stream manager heartbeats to the master (every second): the
age of its last heartbeat counts, not whether a connection is open. One that was seen and then
stays silent for ``lost_after_s`` has lost its executor
(its host died, its job was cancelled): the executor would have restarted a crashed stream
manager within seconds. One never seen gets ``startup_grace_s`` from when this master began
watching. After asking for a relaunch the rule waits ``retry_after_s`` before asking again
for the same container, so a scheduler that is slow to place it is not flooded.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class HealthConfig:
    lost_after_s: float = 20.0
    startup_grace_s: float = 120.0
    retry_after_s: float = 60.0


@dataclass
class ContainerHealth:
    num_containers: int
    clock: Callable[[], float]
    config: HealthConfig = HealthConfig()
    last_seen: dict[int, float] = field(default_factory=dict)
    relaunched_at: dict[int, float] = field(default_factory=dict)
    started: float | None = None

    def seen(self, containers: Iterable[int]) -> None:
        """Containers whose stream manager is connected (or just heartbeated) now."""
        now = self.clock()
        for c in containers:
            self.heard(c, now)

    def heard(self, container: int, at: float) -> None:
        """The container's stream manager was last heard from (a registration, a heartbeat) at
        ``at`` on this rule's clock; silence is counted from then."""
        if at > self.last_seen.get(container, float("-inf")):
            self.last_seen[container] = at

    def due(self) -> list[int]:
        """Containers to relaunch now; each is then not due again for ``retry_after_s``."""
        now = self.clock()
        if self.started is None:
            self.started = now
        cfg = self.config
        out = []
        for c in range(self.num_containers):
            last = self.last_seen.get(c)
            silent = now - (last if last is not None else self.started)
            limit = cfg.lost_after_s if last is not None else cfg.startup_grace_s
            asked = self.relaunched_at.get(c)
            if silent >= limit and (asked is None or now - asked >= cfg.retry_after_s):
                out.append(c)
                self.relaunched_at[c] = now
        return out
