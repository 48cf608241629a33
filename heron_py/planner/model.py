"""The plan data model shared by the CLI, the daemons and the instances.

Everything here is plain data: frozen dataclasses that convert to and from JSON-able dicts,
so the topology master and stream managers can read a plan without importing user code.
User objects (component classes, custom groupings, non-primitive config values) travel as
``PickledRef`` blobs that only an instance, which has the topology package on its path,
ever unpickles.
"""

from __future__ import annotations

import base64
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


class GroupingKind(str, enum.Enum):
    SHUFFLE = "shuffle"
    FIELDS = "fields"
    ALL = "all"
    LOWEST = "lowest"  # heronpy's name for Storm's global grouping
    NONE = "none"
    DIRECT = "direct"
    LOCAL_OR_SHUFFLE = "local_or_shuffle"
    PARTIAL_KEY = "partial_key"
    CUSTOM = "custom"


class ComponentKind(str, enum.Enum):
    SPOUT = "spout"
    BOLT = "bolt"


@dataclass(frozen=True)
class PickledRef:
    """A user object pickled at submit; opened only inside an instance process."""

    data: bytes

    def to_json(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    @classmethod
    def from_json(cls, raw: str) -> PickledRef:
        return cls(base64.b64decode(raw.encode("ascii")))


@dataclass(frozen=True)
class GroupingDef:
    kind: GroupingKind
    fields: tuple[str, ...] = ()
    custom: PickledRef | None = None  # pickled ICustomGrouping object (CUSTOM only)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind.value, "fields": list(self.fields)}
        if self.custom is not None:
            out["custom"] = self.custom.to_json()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GroupingDef:
        custom = d.get("custom")
        return cls(
            kind=GroupingKind(d["kind"]),
            fields=tuple(d.get("fields", ())),
            custom=PickledRef.from_json(custom) if custom else None,
        )


@dataclass(frozen=True)
class StreamDef:
    """An output stream a component declares: its id and field names."""

    name: str
    fields: tuple[str, ...]
    direct: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "fields": list(self.fields), "direct": self.direct}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StreamDef:
        return cls(d["name"], tuple(d["fields"]), bool(d.get("direct", False)))


@dataclass(frozen=True)
class InputDef:
    """One subscription of a bolt: (component, stream) with a grouping."""

    component: str
    stream: str
    grouping: GroupingDef

    def to_dict(self) -> dict[str, Any]:
        return {"component": self.component, "stream": self.stream, "grouping": self.grouping.to_dict()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> InputDef:
        return cls(d["component"], d["stream"], GroupingDef.from_dict(d["grouping"]))


@dataclass(frozen=True)
class ComponentDef:
    name: str
    kind: ComponentKind
    class_ref: PickledRef  # the pickled component class (by reference into the package)
    class_name: str  # "module:qualname", for humans and error messages
    par: int
    inputs: tuple[InputDef, ...]
    outputs: tuple[StreamDef, ...]
    config: Mapping[str, Any] = field(default_factory=dict)  # sanitized: see config_codec

    def output(self, stream: str) -> StreamDef | None:
        for s in self.outputs:
            if s.name == stream:
                return s
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind.value,
            "class_ref": self.class_ref.to_json(),
            "class_name": self.class_name,
            "par": self.par,
            "inputs": [i.to_dict() for i in self.inputs],
            "outputs": [o.to_dict() for o in self.outputs],
            "config": dict(self.config),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ComponentDef:
        return cls(
            name=d["name"],
            kind=ComponentKind(d["kind"]),
            class_ref=PickledRef.from_json(d["class_ref"]),
            class_name=d["class_name"],
            par=int(d["par"]),
            inputs=tuple(InputDef.from_dict(i) for i in d["inputs"]),
            outputs=tuple(StreamDef.from_dict(o) for o in d["outputs"]),
            config=dict(d.get("config", {})),
        )


@dataclass(frozen=True)
class TopologyDef:
    """The logical plan: what the user built, validated at submit."""

    name: str
    components: tuple[ComponentDef, ...]
    config: Mapping[str, Any] = field(default_factory=dict)  # sanitized: see config_codec

    def component(self, name: str) -> ComponentDef:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "components": [c.to_dict() for c in self.components],
            "config": dict(self.config),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TopologyDef:
        return cls(
            name=d["name"],
            components=tuple(ComponentDef.from_dict(c) for c in d["components"]),
            config=dict(d.get("config", {})),
        )


@dataclass(frozen=True)
class TaskPlacement:
    task_id: int
    component: str
    component_index: int  # 0..par-1 within its component
    container: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "component": self.component,
            "component_index": self.component_index,
            "container": self.container,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TaskPlacement:
        return cls(int(d["task_id"]), d["component"], int(d["component_index"]), int(d["container"]))


@dataclass(frozen=True)
class PackingPlan:
    """Which task runs in which container. Task ids start at 1, dense unless a live rescale
    removed some (packing.repack); a component's ids ascend with its indexes."""

    num_containers: int
    tasks: tuple[TaskPlacement, ...]
    # above every id this topology's tasks ever had (a live rescale's new ids start here, so no
    # id of a removed task is reused); 0 in a packing never rescaled live: one past the highest
    id_floor: int = 0

    def tasks_of(self, component: str) -> tuple[int, ...]:
        return tuple(sorted(t.task_id for t in self.tasks if t.component == component))

    def tasks_in(self, container: int) -> tuple[TaskPlacement, ...]:
        return tuple(t for t in self.tasks if t.container == container)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"num_containers": self.num_containers, "tasks": [t.to_dict() for t in self.tasks]}
        if self.id_floor:
            d["id_floor"] = self.id_floor
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PackingPlan:
        return cls(int(d["num_containers"]), tuple(TaskPlacement.from_dict(t) for t in d["tasks"]),
                   int(d.get("id_floor", 0)))


@dataclass(frozen=True)
class StmgrLocation:
    container: int
    host: str
    port: int  # clique + instance port
    pid: int

    def to_dict(self) -> dict[str, Any]:
        return {"container": self.container, "host": self.host, "port": self.port, "pid": self.pid}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StmgrLocation:
        return cls(int(d["container"]), d["host"], int(d["port"]), int(d["pid"]))


class TopologyState(str, enum.Enum):
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"


@dataclass(frozen=True)
class PhysicalPlan:
    """Logical plan + packing + where each stream manager listens + run state.

    ``version`` increases with every plan the topology master pushes, so a stream manager
    or instance can ignore a stale plan that arrives late.
    """

    topology: TopologyDef
    packing: PackingPlan
    stmgrs: tuple[StmgrLocation, ...]
    state: TopologyState
    version: int

    def container_of(self, task_id: int) -> int:
        for t in self.packing.tasks:
            if t.task_id == task_id:
                return t.container
        raise KeyError(task_id)

    def task(self, task_id: int) -> TaskPlacement:
        for t in self.packing.tasks:
            if t.task_id == task_id:
                return t
        raise KeyError(task_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "topology": self.topology.to_dict(),
            "packing": self.packing.to_dict(),
            "stmgrs": [s.to_dict() for s in self.stmgrs],
            "state": self.state.value,
            "version": self.version,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PhysicalPlan:
        return cls(
            topology=TopologyDef.from_dict(d["topology"]),
            packing=PackingPlan.from_dict(d["packing"]),
            stmgrs=tuple(StmgrLocation.from_dict(s) for s in d["stmgrs"]),
            state=TopologyState(d["state"]),
            version=int(d["version"]),
        )


def has_task(plan: PhysicalPlan, task_id: int) -> bool:
    """Whether ``plan``'s packing holds ``task_id`` (a live rescale adds and removes tasks)."""
    return any(t.task_id == task_id for t in plan.packing.tasks)
