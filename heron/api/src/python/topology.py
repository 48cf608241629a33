"""Alias of heronpy.api.topology (heron_py.api.topology)."""

from heronpy.api.topology import *  # noqa: F403
