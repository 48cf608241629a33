"""Alias of heronpy.api.state.stateful_component (heron_py.api.state.stateful_component)."""

from heronpy.api.state.stateful_component import *  # noqa: F403
