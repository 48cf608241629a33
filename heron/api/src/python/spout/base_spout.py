"""Alias of heronpy.api.spout.base_spout (heron_py.api.spout.base_spout)."""

from heronpy.api.spout.base_spout import *  # noqa: F403
