"""Alias of heron_py.api.metrics."""

from heron_py.api.metrics import (
    CountMetric,
    IMetric,
    IReducer,
    MeanReducedMetric,
    MeanReducer,
    MultiCountMetric,
    MultiMeanReducedMetric,
    MultiReducedMetric,
    ReducedMetric,
)

__all__ = [
    "CountMetric",
    "IMetric",
    "IReducer",
    "MeanReducedMetric",
    "MeanReducer",
    "MultiCountMetric",
    "MultiMeanReducedMetric",
    "MultiReducedMetric",
    "ReducedMetric",
]
