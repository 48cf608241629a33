"""The error a Streamlet program's mistake raises."""

from __future__ import annotations

from heron_py.planner.errors import TopologyError


class StreamletError(TopologyError, RuntimeError):
    """A TopologyError (``heron-py submit`` prints it as one line) that is also a RuntimeError,
    because heronpy's Streamlet API raised RuntimeError for the same mistakes and code written
    against it may catch that."""
