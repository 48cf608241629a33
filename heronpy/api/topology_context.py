"""Alias of heron_py.api.topology_context."""

from heron_py.api.topology_context import TopologyContext

__all__ = ["TopologyContext"]
