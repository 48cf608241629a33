"""Alias of heronpy.api.topology_context (heron_py.api.topology_context)."""

from heronpy.api.topology_context import *  # noqa: F403
