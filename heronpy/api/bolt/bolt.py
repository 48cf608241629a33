"""Alias of heron_py.api.bolt.bolt."""

from heron_py.api.bolt.bolt import Bolt

__all__ = ["Bolt"]
