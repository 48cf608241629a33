"""Alias of heron_py.api.streamlet.sink (sink.py is heron-py"s: heronpy"s Python API had no Sink)."""

from heron_py.api.streamlet.sink import Sink

__all__ = ["Sink"]
