"""Loading the serializer that ``topology.serializer.classname`` names: at submit (the planner
refuses a class that cannot be loaded) and in every task (heron_py.api.serializer re-exports it).
Here, below the API, so that the planner's check needs nothing above it."""

from __future__ import annotations

import importlib
from typing import Any, Protocol

DEFAULT_NAMES = ("", "heronpy.api.serializer.PythonSerializer", "heron_py.api.serializer.PythonSerializer")


class Serializer(Protocol):
    """What the engine calls of an IHeronSerializer (heron_py.api.serializer)."""

    def initialize(self, config: Any) -> None: ...

    def serialize(self, obj: Any) -> Any: ...

    def deserialize(self, data: Any) -> Any: ...


def load_serializer(class_name: str, config: Any = None) -> Any:
    """The serializer named by ``topology.serializer.classname`` (a ``Serializer``); None for
    heronpy's default, whose effect (any picklable value travels) the batch pickling already has."""
    if class_name in DEFAULT_NAMES:
        return None
    where = f"config topology.serializer.classname: '{class_name}'"
    mod, _, name = class_name.rpartition(".")
    if not mod:
        raise ValueError(f"{where} is not a class path; expected 'module.Class'")
    try:
        cls = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{where} cannot be imported ({e}); expected 'module.Class' of an "
                         f"IHeronSerializer") from None
    ser = cls()
    if not (callable(getattr(ser, "serialize", None)) and callable(getattr(ser, "deserialize", None))):
        raise ValueError(f"{where} has no serialize/deserialize methods; expected an IHeronSerializer")
    ser.initialize(config)
    return ser
