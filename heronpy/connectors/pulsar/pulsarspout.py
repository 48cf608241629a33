"""Alias of heron_py.api.connectors.pulsar.pulsarspout."""

from heron_py.api.connectors.pulsar.pulsarspout import PulsarSpout

__all__ = ["PulsarSpout"]
