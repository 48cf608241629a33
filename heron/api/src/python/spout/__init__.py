"""Heron 0.15's ``heron.api.src.python.spout`` package and what it re-exported."""

from heron.api.src.python.spout.spout import Spout

__all__ = ["Spout"]
