"""heron-py's compatibility alias for Heron's Python API: ``heronpy.api.X`` is
``heron_py.api.X`` (the same objects, re-exported), so topology files written for heronpy
run unchanged. Do not install Apache Heron's heronpy beside heron-py.

heronpy 0.15.0's package re-exported the API at its top (``from heronpy import Bolt, Grouping,
TopologyBuilder``), which later releases dropped: those names are here too, each loaded from
heron_py.api when first used (importing ``heronpy.api.X`` loads nothing more). Heron 0.15's
source paths (``heron.api.src.python.X``) are the ``heron`` package beside this one.
"""

from __future__ import annotations

import importlib
from typing import Any

# heronpy 0.15's top-level names: name -> the heron_py.api module that defines it (its wheel's
# heronpy/__init__.py, and the names its packaging template added for the next releases)
_NAMES: dict[str, str] = {
    "State": "state.state", "HashMapState": "state.state", "StatefulComponent": "state.stateful_component",
    "Stream": "stream", "Grouping": "stream", "Topology": "topology", "TopologyBuilder": "topology",
    "TopologyContext": "topology_context", "Bolt": "bolt.bolt", "SlidingWindowBolt": "bolt.window_bolt",
    "TumblingWindowBolt": "bolt.window_bolt", "WindowContext": "bolt.window_bolt", "Spout": "spout.spout",
    "ICustomGrouping": "custom_grouping", "IMetric": "metrics", "CountMetric": "metrics",
    "MultiCountMetric": "metrics", "IReducer": "metrics", "MeanReducer": "metrics", "ReducedMetric": "metrics",
    "MultiReducedMetric": "metrics", "AssignableMetrics": "metrics", "MultiAssignableMetrics": "metrics",
    "MeanReducedMetric": "metrics", "MultiMeanReducedMetric": "metrics", "IHeronSerializer": "serializer",
    "PythonSerializer": "serializer", "default_serializer": "serializer", "ITaskHook": "task_hook",
    "Tuple": "tuple", "TupleHelper": "tuple",
}
# ... and two of its modules, by name
_MODULES = ("api_constants", "global_metrics")


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"heron_py.api.{name}")
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'heronpy' has no attribute '{name}'")
    return getattr(importlib.import_module(f"heron_py.api.{module}"), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES, *_MODULES})
