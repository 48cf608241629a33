"""Alias of heron_py.api.streamlet.streamlet."""

from heron_py.api.streamlet.streamlet import Streamlet

__all__ = ["Streamlet"]
