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
        if not isinstance(name, str):
            raise TypeError(f"Stream name must be a str, found {name!r}")
        if fields is None:
            fields = []
        elif isinstance(fields, str):
            fields = [fields]  # heron-py accepts one field name; heronpy wanted a list
        elif not isinstance(fields, (list, tuple)):
            raise TypeError(f"Stream '{name}': fields must be a list or tuple of str, found {fields!r}")
        fields = list(fields)
        for f in fields:
            if not isinstance(f, str):
                raise TypeError(f"Stream '{name}': field names must be str, found {f!r}")
        if not isinstance(direct, bool):
            raise TypeError(f"Stream '{name}': direct must be True or False, found {direct!r}")
        self.fields = fields
        self.stream_id = name
        # heronpy refused direct streams (NotImplementedError); heron-py routes them
        self.direct = direct

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Stream) and self.fields == other.fields
                and self.stream_id == other.stream_id and self.direct == other.direct)

    def __hash__(self) -> int:
        return hash((tuple(self.fields), self.stream_id, self.direct))

    def __repr__(self) -> str:
        return f"Stream(fields={self.fields!r}, name={self.stream_id!r}, direct={self.direct})"


class Grouping:
    """heronpy's grouping values.

    Each is a ``GroupingDef`` (heron_py.planner.model), not heronpy's protobuf enum ints, so
    ``inputs={spec: Grouping.SHUFFLE}`` carries straight into the plan. Equality still works
    as in heronpy: ``gtype == Grouping.SHUFFLE``. heronpy aliased LOCAL_OR_SHUFFLE to SHUFFLE;
    heron-py routes it for real (a task in the emitter's container first).
    """

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
            raise ValueError("a fields grouping needs at least one field name")
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
                raise TopologyError(f"custom grouping '{customgrouper}' cannot be imported ({e}); expected "
                                    f"'module.Class' naming an ICustomGrouping class at module level") from e
        if not hasattr(customgrouper, "choose_tasks"):
            raise TypeError(f"custom grouping must be an ICustomGrouping, found {type(customgrouper).__name__}")
        try:
            data = pickle.dumps(customgrouper)
        except Exception as e:
            raise TopologyError(f"custom grouping {type(customgrouper).__name__} cannot be serialized "
                                f"(pickle: {e}); define it at module level of the topology file or a module") from e
        return GroupingDef(GroupingKind.CUSTOM, (), PickledRef(data))

    @classmethod
    def custom_serialized(cls, serialized: bytes, is_java: bool = False) -> GroupingDef:
        """A custom grouping already pickled by the caller (heronpy's lower-level form)."""
        if is_java:
            raise NotImplementedError("custom groupings implemented in Java are not supported by heron-py")
        if not isinstance(serialized, bytes):
            raise TypeError(f"custom_serialized() takes a pickled ICustomGrouping as bytes, "
                            f"found {type(serialized).__name__}")
        return GroupingDef(GroupingKind.CUSTOM, (), PickledRef(serialized))

    @classmethod
    def custom_object(cls, java_class_name: str, arg_list: Any) -> GroupingDef:
        raise NotImplementedError("custom_object() (a Java grouping class) is not supported by heron-py")
