"""Alias of heron_py.api.connectors.pulsar.pulsarstreamlet."""

from heron_py.api.connectors.pulsar.pulsarstreamlet import PulsarStreamlet

__all__ = ["PulsarStreamlet"]
