"""Alias of heronpy.api.state.state (heron_py.api.state.state)."""

from heronpy.api.state.state import *  # noqa: F403
