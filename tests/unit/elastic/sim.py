"""A fluid model of a running chain topology (a spout, then bolts one after another), for the
health manager's tests: given the offered input and each stage's capacity, the window of
metrics the topology master would serve, in the shape of its HTTP API.

The throughput is the most every stage lets through: the offered rate, the spouts' capacity,
and each bolt's capacity over the records it gets per source record. A bolt's capacity is that
of its most loaded task for its share of the input (a fields grouping's hot key, a slow task
under round robin). A bolt that binds below the offered rate and the spouts' capacity holds
the topology in backpressure: its tasks' queues fill, the stream managers of their containers
name it, and the spouts spend the rest of the window blocked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from heron_py.elastic.observations import TopologyObservation, build_observation


@dataclass
class Stage:
    name: str
    capacity: float  # records/s one task takes in (a spout: emits)
    selectivity: float = 1.0  # records out per record in
    # what each task past the first adds, as a share of one task's capacity: 1 scales linearly,
    # 0 is a shared resource (one database) that more tasks do not make faster
    scaling: float = 1.0
    weights: list[float] | None = None  # share of the input per task; None: even
    speed: dict[int, float] = field(default_factory=dict)  # task index -> factor on its capacity


class Sim:
    def __init__(self, stages: list[Stage], parallelism: dict[str, int], offered: float, seconds: float = 30.0,
                 tasks_per_container: int = 4) -> None:
        self.stages = stages
        self.parallelism = dict(parallelism)
        self.offered = offered
        self.seconds = seconds
        self.per_container = tasks_per_container

    def stage(self, name: str) -> Stage:
        return next(s for s in self.stages if s.name == name)

    def components(self) -> list[dict[str, Any]]:
        return [{"name": s.name, "parallelism": self.parallelism[s.name], "is_spout": i == 0,
                 "inputs": [] if i == 0 else [self.stages[i - 1].name]} for i, s in enumerate(self.stages)]

    def task_ids(self) -> dict[str, list[int]]:
        out, n = {}, 1
        for s in self.stages:
            out[s.name] = list(range(n, n + self.parallelism[s.name]))
            n += self.parallelism[s.name]
        return out

    def placement(self) -> dict[str, int]:
        return {str(t): (t - 1) // self.per_container + 1 for ids in self.task_ids().values() for t in ids}

    def _weights(self, s: Stage) -> list[float]:
        p = self.parallelism[s.name]
        w = s.weights if s.weights is not None and len(s.weights) == p else [1.0] * p
        return [x / sum(w) for x in w]

    def _task_caps(self, s: Stage) -> list[float]:
        p = self.parallelism[s.name]
        total = s.capacity * (1 + s.scaling * (p - 1))
        return [total / p * s.speed.get(i, 1.0) for i in range(p)]

    def flow(self) -> tuple[float, str | None, dict[str, float]]:
        """(source records/s through, the bolt that binds or None, records/s into each stage)."""
        spout = self.stages[0]
        limit = min(self.offered, sum(self._task_caps(spout)))
        gain, bound, gains = 1.0, None, {}
        for s in self.stages[1:]:
            gains[s.name] = gain
            cap = min(c / w for c, w in zip(self._task_caps(s), self._weights(s), strict=True)) / gain
            if cap < limit:
                limit, bound = cap, s.name
            gain *= s.selectivity
        return limit, bound, {s.name: limit * gains.get(s.name, 1.0) for s in self.stages}

    def api(self) -> dict[str, Any]:
        """{"metrics": {component: its /topologies/metrics answer}, "stmgrs": {container: counters}}."""
        _, bound, into = self.flow()
        ids, window_ms, where = self.task_ids(), self.seconds * 1000.0, self.placement()
        metrics: dict[str, Any] = {}
        held: dict[int, float] = {}
        for i, s in enumerate(self.stages):
            m: dict[str, dict[str, float]] = {}
            for task, cap, w in zip(ids[s.name], self._task_caps(s), self._weights(s), strict=True):
                rate = into[s.name] * w
                busy = min(1.0, rate / cap)
                t = str(task)
                if i == 0:
                    put(m, "__emit-count/default", t, rate * self.seconds)
                else:
                    put(m, f"__execute-count/{self.stages[i - 1].name}/default", t, rate * self.seconds)
                    if s.selectivity > 0:
                        put(m, "__emit-count/default", t, rate * s.selectivity * self.seconds)
                put(m, "__busy-time-ms", t, busy * window_ms)
                put(m, "__time-blocked-ms", t, (1 - busy) * window_ms if i == 0 and bound is not None else 0.0)
                binding = s.name == bound and busy >= 1.0 - 1e-9
                put(m, "__in-queue-batches", t, 60.0 if binding else 1.0)
                if binding:
                    held[where[t]] = 0.6 * window_ms
            metrics[s.name] = {"component": s.name, "interval": self.seconds, "metrics": m,
                               "metricnames": sorted(m)}
        stmgrs: dict[str, dict[str, float]] = {}
        for c in sorted(set(where.values())):
            counters = {"__time_spent_back_pressure_ms": held.get(c, 0.0)}
            if c in held and bound is not None:
                counters[f"__time_spent_back_pressure_by_compid/{bound}"] = held[c]
            stmgrs[str(c)] = counters
        return {"metrics": metrics, "stmgrs": stmgrs}

    def observe(self) -> TopologyObservation:
        api = self.api()
        return build_observation(self.components(), api["metrics"], self.seconds, stmgrs=api["stmgrs"],
                                 placement=self.placement())

    def apply(self, parallelism: dict[str, int]) -> None:
        self.parallelism.update(parallelism)


def put(m: dict[str, dict[str, float]], name: str, task: str, value: float) -> None:
    m.setdefault(name, {})[task] = value
