"""Alias of heronpy.api.bolt.bolt (heron_py.api.bolt.bolt)."""

from heronpy.api.bolt.bolt import *  # noqa: F403
