"""Alias of heron_py.api.spout.base_spout."""

from heron_py.api.spout.base_spout import BaseSpout

__all__ = ["BaseSpout"]
