"""Alias of heron_py.api.topology."""

from heron_py.api.topology import Topology, TopologyBuilder, TopologyType

__all__ = ["Topology", "TopologyBuilder", "TopologyType"]
