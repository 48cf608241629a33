"""Alias of heron_py.api.connectors.mock.arraylooper."""

from heron_py.api.connectors.mock.arraylooper import ArrayLooper

__all__ = ["ArrayLooper"]
