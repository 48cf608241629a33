"""Alias of heron_py.api.streamlet.streamlet (plus TimeWindow, which Heron's Pulsar example
imports from here)."""

from heron_py.api.streamlet.streamlet import Streamlet
from heron_py.api.streamlet.windowconfig import TimeWindow

__all__ = ["Streamlet", "TimeWindow"]
