"""Alias of heronpy.api.bolt.base_bolt (heron_py.api.bolt.base_bolt)."""

from heronpy.api.bolt.base_bolt import *  # noqa: F403
