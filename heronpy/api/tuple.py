"""Alias of heron_py.api.tuple."""

from heron_py.api.tuple import HeronTuple, Tuple, TupleHelper

__all__ = ["HeronTuple", "Tuple", "TupleHelper"]
