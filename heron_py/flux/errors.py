"""The one error type of Flux loading: a TopologyError, so the CLI reports it like any other."""

from __future__ import annotations

from heron_py.planner.errors import TopologyError


class FluxError(TopologyError):
    """What is wrong, where (file, and spout/bolt/stream), what was expected, what was found."""


def type_name(value: object) -> str:
    """A YAML reader's name for a value's type (Python's names mean little to a YAML author)."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__
