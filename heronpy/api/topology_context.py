"""Alias of heron_py.api.topology_context."""

from heron_py.api.topology_context import StreamId, TopologyContext

__all__ = ["StreamId", "TopologyContext"]
