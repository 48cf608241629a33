"""Alias of heron_py.api.spout.spout."""

from heron_py.api.spout.spout import Spout

__all__ = ["Spout"]
