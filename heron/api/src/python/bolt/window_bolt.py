"""Alias of heronpy.api.bolt.window_bolt (heron_py.api.bolt.window_bolt)."""

from heronpy.api.bolt.window_bolt import *  # noqa: F403
