"""Alias of heron_py.api.component.component_spec."""

from heron_py.api.component.component_spec import GlobalStreamId, HeronComponentSpec

__all__ = ["GlobalStreamId", "HeronComponentSpec"]
