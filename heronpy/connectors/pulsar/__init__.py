"""Alias of heron_py.api.connectors.pulsar: heron-py does not provide Pulsar; using it raises
one error."""

from heron_py.api.connectors.pulsar import UNSUPPORTED, unsupported

__all__ = ["UNSUPPORTED", "unsupported"]
