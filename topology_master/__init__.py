"""Topology master: registers stream managers, builds and pushes the physical plan."""
