"""Alias of heron_py.api.metrics."""

from heron_py.api.metrics import (
    AssignableMetrics,
    CountMetric,
    IMetric,
    IReducer,
    MeanReducedMetric,
    MeanReducer,
    MultiAssignableMetrics,
    MultiCountMetric,
    MultiMeanReducedMetric,
    MultiReducedMetric,
    ReducedMetric,
)

__all__ = [
    "AssignableMetrics",
    "CountMetric",
    "IMetric",
    "IReducer",
    "MeanReducedMetric",
    "MeanReducer",
    "MultiAssignableMetrics",
    "MultiCountMetric",
    "MultiMeanReducedMetric",
    "MultiReducedMetric",
    "ReducedMetric",
]
