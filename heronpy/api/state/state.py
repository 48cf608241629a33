"""Alias of heron_py.api.state.state."""

from heron_py.api.state.state import HashMapState, State

__all__ = ["HashMapState", "State"]
