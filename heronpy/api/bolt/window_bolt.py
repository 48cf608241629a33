"""Alias of heron_py.api.bolt.window_bolt."""

from heron_py.api.bolt.window_bolt import SlidingWindowBolt, TumblingWindowBolt, WindowContext

__all__ = ["SlidingWindowBolt", "TumblingWindowBolt", "WindowContext"]
