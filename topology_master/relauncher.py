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
                 active: Callable[[], bool], relaunch: Relaunch, log: logging.Logger,
                 own_container: int | None = None) -> None:
        """``own_container``: this master's container, never relaunched by it (the relaunch would
        stop this master with it); it is said in the log, for the operator (or a standby)."""
        self.health = health
        self._heard = heard
        self._active = active
        self._relaunch = relaunch
        self._log = log
        self.requests: list[int] = []  # containers asked for, in order (status, tests)
        self._own = own_container

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
                if c == self._own:
                    self._log.error("container %d, this master's own, has had no stream manager for %.0f s (its "
                                    "executor is gone?); a master cannot relaunch its own container: run heron-py "
                                    "restart CLUSTER NAME %d (a standby master would relaunch it)", c,
                                    self.health.config.lost_after_s, c)
                    continue
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
