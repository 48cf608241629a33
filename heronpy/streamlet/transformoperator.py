"""Alias of heron_py.api.streamlet.transformoperator."""

from heron_py.api.streamlet.transformoperator import TransformOperator

__all__ = ["TransformOperator"]
