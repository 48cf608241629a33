"""Alias of heron_py.api.stream."""

from heron_py.api.stream import Grouping, Stream

__all__ = ["Grouping", "Stream"]
