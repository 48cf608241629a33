"""TopologyContext, as heronpy's: what a running task knows about its topology. Pure: the
runtime builds one per task from the plan and reads back what the user registered."""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable
from typing import Any

from heron_py.api.metrics import IMetric
from heron_py.api.task_hook import ITaskHook
from heron_py.planner.model import GroupingDef, PackingPlan, TopologyDef

MetricsSink = Callable[[str, IMetric, int], None]

# heronpy's get_sources keys had the fields of Heron's StreamId protobuf message
StreamId = namedtuple("StreamId", "id component_name")


class TopologyContext:
    def __init__(self, topology: TopologyDef, packing: PackingPlan, task_id: int, config: dict[str, Any],
                 metrics_sink: MetricsSink | None = None) -> None:
        self._task_id = task_id
        self._config = config
        self._metrics_sink = metrics_sink
        self.set_plan(topology, packing)
        self.registered_metrics: dict[str, tuple[IMetric, int]] = {}
        # ITaskHook objects registered with add_task_hook. The runtime does not call them yet:
        # heronpy passes EmitInfo, BoltExecuteInfo and the like, which come with the rest of its API
        self.task_hooks: list[Any] = []

    def set_plan(self, topology: TopologyDef, packing: PackingPlan) -> None:
        """A live rescale's new topology and packing: the task maps follow, and what the user
        registered here (metrics, task hooks) stays."""
        self.topology = topology
        self.packing = packing
        self._task_to_component = {t.task_id: t.component for t in packing.tasks}
        self._component_tasks: dict[str, list[int]] = {}
        for t in sorted(packing.tasks, key=lambda t: t.task_id):
            self._component_tasks.setdefault(t.component, []).append(t.task_id)

    def get_task_id(self) -> int:
        return self._task_id

    def get_component_id(self) -> str:
        return self._task_to_component[self._task_id]

    def get_cluster_config(self) -> dict[str, Any]:
        """The topology config merged with this component's, typed back (ints, bools)."""
        return self._config

    def get_topology_name(self) -> str:
        return self.topology.name

    def get_task_to_component_map(self) -> dict[int, str]:
        return dict(self._task_to_component)

    def get_component_tasks(self, component_id: str) -> list[int] | None:
        """Sorted task ids of ``component_id``; None for an unknown component, as heronpy."""
        tasks = self._component_tasks.get(component_id)
        return list(tasks) if tasks is not None else None

    def get_sources(self, component_id: str) -> dict[StreamId, GroupingDef] | None:
        """The inputs of ``component_id``: StreamId(stream, source component) → grouping
        (compare with ``Grouping.SHUFFLE`` etc.); None for an unknown component."""
        try:
            comp = self.topology.component(component_id)
        except KeyError:
            return None
        return {StreamId(i.stream, i.component): i.grouping for i in comp.inputs}

    def get_this_sources(self) -> dict[StreamId, GroupingDef] | None:
        return self.get_sources(self.get_component_id())

    def get_num_containers(self) -> int:
        return self.packing.num_containers

    def register_metric(self, name: str, metric: IMetric, time_bucket_in_sec: int) -> None:
        """The runtime reads ``metric.get_value_and_reset()`` every ``time_bucket_in_sec``."""
        if not isinstance(metric, IMetric):
            raise TypeError(f"register_metric('{name}'): expected an IMetric, found {type(metric).__name__}")
        if isinstance(time_bucket_in_sec, bool) or not isinstance(time_bucket_in_sec, int) \
                or time_bucket_in_sec <= 0:
            raise ValueError(f"register_metric('{name}'): time_bucket_in_sec must be an integer > 0, "
                             f"found {time_bucket_in_sec!r}")
        if name in self.registered_metrics:
            raise RuntimeError(f"register_metric('{name}'): a metric with that name is already registered "
                             f"in task {self._task_id}")
        self.registered_metrics[name] = (metric, time_bucket_in_sec)
        if self._metrics_sink is not None:
            self._metrics_sink(name, metric, time_bucket_in_sec)

    def get_metrics_collector(self) -> MetricsCollector:
        """heronpy's collector of this task's metrics (``register_metric`` as on the context)."""
        return MetricsCollector(self)

    def add_task_hook(self, task_hook: Any) -> None:
        if not isinstance(task_hook, ITaskHook):
            raise TypeError(f"add_task_hook(): expected an ITaskHook, found {type(task_hook).__name__}")
        self.task_hooks.append(task_hook)


class MetricsCollector:
    """What ``context.get_metrics_collector()`` returns: heronpy's ``register_metric``."""

    def __init__(self, context: TopologyContext) -> None:
        self._context = context

    def register_metric(self, name: str, metric: IMetric, time_bucket_in_sec: int) -> None:
        self._context.register_metric(name, metric, time_bucket_in_sec)
