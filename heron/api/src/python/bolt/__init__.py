"""Heron 0.15's ``heron.api.src.python.bolt`` package and what it re-exported."""

from heron.api.src.python.bolt.bolt import Bolt
from heron.api.src.python.bolt.window_bolt import SlidingWindowBolt, TumblingWindowBolt, WindowContext

__all__ = ["Bolt", "SlidingWindowBolt", "TumblingWindowBolt", "WindowContext"]
