"""Heron 0.15's ``heron.api.src.python.component`` package and what it re-exported."""

from heron.api.src.python.component.base_component import BaseComponent
from heron.api.src.python.component.component_spec import GlobalStreamId, HeronComponentSpec

__all__ = ["BaseComponent", "GlobalStreamId", "HeronComponentSpec"]
