"""Alias of heron_py.api.streamlet.window."""

from heron_py.api.streamlet.window import KeyedWindow

__all__ = ["KeyedWindow"]
