"""Alias of heronpy.api.api_constants (heron_py.api.api_constants)."""

from heronpy.api.api_constants import *  # noqa: F403
