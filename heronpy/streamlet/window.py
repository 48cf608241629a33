"""Alias of heron_py.api.streamlet.window."""

from heron_py.api.streamlet.window import Window

__all__ = ["Window"]
