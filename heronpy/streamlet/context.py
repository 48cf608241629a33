"""Alias of heron_py.api.streamlet.context."""

from heron_py.api.streamlet.context import Context

__all__ = ["Context"]
