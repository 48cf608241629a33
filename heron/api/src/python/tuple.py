"""Alias of heronpy.api.tuple (heron_py.api.tuple)."""

from heronpy.api.tuple import *  # noqa: F403
