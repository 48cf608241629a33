"""Alias of heron_py.api.streamlet.builder."""

from heron_py.api.streamlet.builder import Builder

__all__ = ["Builder"]
