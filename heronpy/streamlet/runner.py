"""Alias of heron_py.api.streamlet.runner."""

from heron_py.api.streamlet.runner import Runner, build_topology

__all__ = ["Runner", "build_topology"]
