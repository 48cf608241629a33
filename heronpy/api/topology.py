"""Alias of heron_py.api.topology."""

from heron_py.api.topology import Topology, TopologyBuilder, TopologyType, defined_topologies

__all__ = ["Topology", "TopologyBuilder", "TopologyType", "defined_topologies"]
