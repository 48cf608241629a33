"""Alias of heron_py.api.streamlet.config."""

from heron_py.api.streamlet.config import Config, DeliverySemantics

__all__ = ["Config", "DeliverySemantics"]
