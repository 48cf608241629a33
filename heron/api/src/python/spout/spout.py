"""Alias of heronpy.api.spout.spout (heron_py.api.spout.spout)."""

from heronpy.api.spout.spout import *  # noqa: F403
