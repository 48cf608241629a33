"""Streams and groupings, with heronpy's names."""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from typing import Any

from heron_py.planner.errors import TopologyError
from heron_py.planner.model import GroupingDef, GroupingKind, PickledRef


class Stream:
    DEFAULT_STREAM_ID = "default"

    def __init__(self, fields: Iterable[str] | None = None, name: str = DEFAULT_STREAM_ID,
                 direct: bool = False) -> None:
        if fields is None:
            fields = []
        elif isinstance(fields, str):
            fields = [fields]
        fields = list(fields)
        for f in fields:
            if not isinstance(f, str):
                raise TypeError(f"Stream '{name}': field names must be str, found {f!r}")
        if not isinstance(name, str):
            raise TypeError(f"Stream name must be str, found {name!r}")
        self.fields = fields
        self.stream_id = name
        self.direct = bool(direct)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Stream) and self.fields == other.fields
                and self.stream_id == other.stream_id and self.direct == other.direct)

    def __hash__(self) -> int:
        return hash((tuple(self.fields), self.stream_id, self.direct))

    def __repr__(self) -> str:
        return f"Stream(fields={self.fields!r}, name={self.stream_id!r}, direct={self.direct})"


class Grouping:
    """heronpy's grouping values. SHUFFLE etc. are GroupingDef values; fields() and
    custom() build them."""

    SHUFFLE = GroupingDef(GroupingKind.SHUFFLE)
    ALL = GroupingDef(GroupingKind.ALL)
    LOWEST = GroupingDef(GroupingKind.LOWEST)
    NONE = GroupingDef(GroupingKind.NONE)
    DIRECT = GroupingDef(GroupingKind.DIRECT)
    # heron-py extras (Storm has them)
    LOCAL_OR_SHUFFLE = GroupingDef(GroupingKind.LOCAL_OR_SHUFFLE)
    GLOBAL = LOWEST

    @classmethod
    def is_grouping_sane(cls, gtype: Any) -> bool:
        return isinstance(gtype, GroupingDef)

    @staticmethod
    def _field_list(fields: tuple[Any, ...]) -> tuple[str, ...]:
        if len(fields) == 1 and isinstance(fields[0], (list, tuple)):
            fields = tuple(fields[0])
        if not fields:
            raise TypeError("a fields grouping needs at least one field name")
        for f in fields:
            if not isinstance(f, str):
                raise TypeError(f"a fields grouping takes field names (str), found {f!r}")
        return tuple(fields)

    @classmethod
    def fields(cls, *fields: Any) -> GroupingDef:
        return GroupingDef(GroupingKind.FIELDS, cls._field_list(fields))

    @classmethod
    def partial_key(cls, *fields: Any) -> GroupingDef:
        return GroupingDef(GroupingKind.PARTIAL_KEY, cls._field_list(fields))

    @classmethod
    def custom(cls, customgrouper: Any) -> GroupingDef:
        if isinstance(customgrouper, str):
            # heronpy accepts "module.Class": instantiate it here so it is checked at build
            import importlib

            mod_name, _, cls_name = customgrouper.rpartition(".")
            try:
                customgrouper = getattr(importlib.import_module(mod_name), cls_name)()
            except (ImportError, AttributeError, ValueError) as e:
                raise TopologyError(f"custom grouping {customgrouper!r}: cannot import it ({e})") from e
        if not hasattr(customgrouper, "choose_tasks"):
            raise TypeError(f"custom grouping must be an ICustomGrouping, found {type(customgrouper).__name__}")
        try:
            data = pickle.dumps(customgrouper)
        except Exception as e:
            raise TopologyError(f"custom grouping {type(customgrouper).__name__} cannot be serialized "
                                f"(pickle: {e}); define it at module level of the topology file or a module") from e
        return GroupingDef(GroupingKind.CUSTOM, (), PickledRef(data))
