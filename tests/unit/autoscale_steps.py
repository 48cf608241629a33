"""Steps of the health manager as ``heron-py autoscale`` records them, for the tests of their
readers (the master's page and endpoint, the metrics manager's export): its real loop
(heron_py/cli/autoscale.py ``HealthManager``) over the fluid word count of
tests/unit/elastic/sim.py, appending to its real record (``AutoscaleLog``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from heron_py.cli.autoscale import HealthManager, StepFailed
from heron_py.cli.autoscale_log import AutoscaleLog
from heron_py.common.config import LogCaps
from heron_py.elastic.config import AutoscaleConfig
from heron_py.elastic.observations import TopologyObservation
from heron_py.elastic.policy import RestartContainer, Scale
from tests.unit.elastic.sim import Sim, Stage

UPDATE_FAILED = "update: topology 'wc' did not come back within 60 s: tasks not running yet: ['4']"
UNREACHABLE = "observing topology 'wc': the topology master is not reachable"


def word_count(offered: float = 4000) -> Sim:
    """count needs 4 tasks at 4,000 sentences/s and runs 1: under-provisioned."""
    return Sim([Stage("sentences", 5000), Stage("split", 20_000, 8), Stage("count", 10_000, 0)],
               {"sentences": 1, "split": 1, "count": 1}, offered)


class Recorder:
    """A health manager over ``sim`` recording to ``record``; its clock moves only by ``at``."""

    def __init__(self, record: Path, sim: Sim | None = None, failures: int = 0) -> None:
        self.log = AutoscaleLog(record, LogCaps())
        self.sim = sim or word_count()
        self.now = 1_700_000_000.0
        self.failures = failures
        self.reachable = True
        self.manager = HealthManager(AutoscaleConfig(enabled=True), observe=self._observe, act=self._act,
                                     record=self.log.append, clock=lambda: self.now, sleep=lambda s: None)

    def at(self, now: float) -> dict[str, Any]:
        """One step at ``now``: its entry, appended to the record."""
        self.now = now
        return self.manager.step()

    def _observe(self) -> TopologyObservation:
        if not self.reachable:
            raise StepFailed(UNREACHABLE)
        return self.sim.observe()

    def _act(self, action: Scale | RestartContainer) -> str:
        if self.failures:
            self.failures -= 1
            raise StepFailed(UPDATE_FAILED)
        assert isinstance(action, Scale)
        self.sim.apply(dict(action.parallelism))
        return "updated: " + ", ".join(f"{c} -> {n}" for c, n in action.parallelism)


def four_steps(record: Path) -> list[dict[str, Any]]:
    """A failed scale of count, the same scale done 5 s later, a step in its cooldown, and one
    that could not observe the topology."""
    r = Recorder(record, failures=1)
    t = r.now
    steps = [r.at(t), r.at(t + 5), r.at(t + 35)]
    r.reachable = False
    steps.append(r.at(t + 65))
    return steps
