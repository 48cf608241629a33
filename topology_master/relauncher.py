"""The active topology master's watch over its containers: every second it feeds the pure
rule (health.py) with when each container's stream manager was last heard from (its
registration or its latest heartbeat: a connection left open to a frozen process or a vanished
host proves nothing), and asks the
scheduler the topology was launched with to relaunch the ones that are due. The request
runs on a worker thread (sbatch, process start-up) so the master's loop never waits."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from topology_master.health import ContainerHealth

Relaunch = Callable[[int], None]


class Relauncher:
    def __init__(self, health: ContainerHealth, *, heard: Callable[[], Mapping[int, float]],
                 active: Callable[[], bool], relaunch: Relaunch, log: logging.Logger) -> None:
        self.health = health
        self._heard = heard
        self._active = active
        self._relaunch = relaunch
        self._log = log
        self.requests: list[int] = []  # containers asked for, in order (status, tests)

    def tick(self) -> list[int]:
        """One look: the containers to relaunch now (none while this master is not active)."""
        if not self._active():
            self.health.started = None  # a master that becomes active starts watching anew
            self.health.last_seen.clear()
            return []
        for container, at in self._heard().items():
            self.health.heard(container, at)
        return self.health.due()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(1.0)
            for c in self.tick():
                self._log.warning("container %d has had no stream manager for %.0f s; asking the scheduler to "
                                  "relaunch it", c, self.health.config.lost_after_s)
                self.requests.append(c)
                loop.run_in_executor(None, self._ask, c)

    def _ask(self, container: int) -> None:
        try:
            self._relaunch(container)
            self._log.info("relaunch of container %d requested", container)
        except Exception as e:  # a scheduler that fails now may work at the next attempt
            self._log.error("relaunch of container %d failed: %s", container, e)
