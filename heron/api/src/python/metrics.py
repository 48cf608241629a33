"""Alias of heronpy.api.metrics (heron_py.api.metrics)."""

from heronpy.api.metrics import *  # noqa: F403
