"""Alias of heronpy.api.stream (heron_py.api.stream)."""

from heronpy.api.stream import *  # noqa: F403
