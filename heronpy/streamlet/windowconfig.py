"""Alias of heron_py.api.streamlet.windowconfig."""

from heron_py.api.streamlet.windowconfig import WindowConfig

__all__ = ["WindowConfig"]
