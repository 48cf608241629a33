"""Alias of heron_py.api.streamlet.generator."""

from heron_py.api.streamlet.generator import Generator

__all__ = ["Generator"]
