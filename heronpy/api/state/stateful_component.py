"""Alias of heron_py.api.state.stateful_component."""

from heron_py.api.state.stateful_component import StatefulComponent

__all__ = ["StatefulComponent"]
