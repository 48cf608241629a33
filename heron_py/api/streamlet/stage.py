"""What one streamlet compiles to: its component class, config and input grouping."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from heron_py.api.stream import Grouping
from heron_py.planner.model import GroupingDef

# (where, the stage's packed objects) -> the grouping of each of its inputs
GroupingFactory = Callable[[str, Mapping[str, bytes]], GroupingDef]


def shuffle(where: str, packed: Mapping[str, bytes]) -> GroupingDef:
    return Grouping.SHUFFLE


def lowest(where: str, packed: Mapping[str, bytes]) -> GroupingDef:
    """A global reduce: every element to the lowest task."""
    return Grouping.LOWEST


@dataclass(frozen=True)
class Stage:
    prefix: str  # heronpy's default-name prefix ("map" → "map-1")
    component: type
    objects: dict[str, Any] = field(default_factory=dict)  # config key → user object, cloudpickled at build
    settings: dict[str, Any] = field(default_factory=dict)  # plain config entries
    grouping: GroupingFactory | None = shuffle  # None: a source

    @property
    def is_source(self) -> bool:
        return self.grouping is None
