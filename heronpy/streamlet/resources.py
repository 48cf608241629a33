"""Alias of heron_py.api.streamlet.resources."""

from heron_py.api.streamlet.resources import Resources

__all__ = ["Resources"]
