"""TopologyContext, as heronpy's: what a running task knows about the topology. Pure."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from heron_py.api.metrics import IMetric
from heron_py.planner.model import PackingPlan, TopologyDef

MetricsSink = Callable[[str, IMetric, int], None]


class TopologyContext:
    def __init__(self, topology: TopologyDef, packing: PackingPlan, task_id: int, config: dict[str, Any],
                 metrics_sink: MetricsSink | None = None) -> None:
        self.topology = topology
        self.packing = packing
        self._task_id = task_id
        self._config = config
        self._metrics_sink = metrics_sink
        self._task_to_component = {t.task_id: t.component for t in packing.tasks}
        self.registered_metrics: dict[str, tuple[IMetric, int]] = {}

    def get_task_id(self) -> int:
        return self._task_id

    def get_component_id(self) -> str:
        return self._task_to_component[self._task_id]

    def get_cluster_config(self) -> dict[str, Any]:
        return self._config

    def get_topology_name(self) -> str:
        return self.topology.name

    def get_task_to_component_map(self) -> dict[int, str]:
        return dict(self._task_to_component)

    def get_component_tasks(self, component_id: str) -> list[int]:
        return sorted(t for t, c in self._task_to_component.items() if c == component_id)

    def get_sources(self, component_id: str) -> dict[Any, Any]:
        """The (component, stream) → grouping kind of each input of ``component_id``."""
        comp = self.topology.component(component_id)
        return {(i.component, i.stream): i.grouping.kind.value for i in comp.inputs}

    def get_this_sources(self) -> dict[Any, Any]:
        return self.get_sources(self.get_component_id())

    def get_num_containers(self) -> int:
        return self.packing.num_containers

    def register_metric(self, name: str, metric: IMetric, time_bucket_in_sec: int) -> None:
        if not isinstance(metric, IMetric):
            raise TypeError(f"register_metric('{name}'): expected an IMetric, found {type(metric).__name__}")
        if time_bucket_in_sec <= 0:
            raise ValueError(f"register_metric('{name}'): time_bucket_in_sec must be > 0, "
                             f"found {time_bucket_in_sec}")
        self.registered_metrics[name] = (metric, int(time_bucket_in_sec))
        if self._metrics_sink is not None:
            self._metrics_sink(name, metric, int(time_bucket_in_sec))
