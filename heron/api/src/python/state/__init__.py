"""Heron 0.15's ``heron.api.src.python.state`` package and what it re-exported."""

from heron.api.src.python.state.state import HashMapState, State
from heron.api.src.python.state.stateful_component import StatefulComponent

__all__ = ["HashMapState", "State", "StatefulComponent"]
