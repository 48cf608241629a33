"""Alias of heron_py.api.custom_grouping."""

from heron_py.api.custom_grouping import ICustomGrouping

__all__ = ["ICustomGrouping"]
