"""Alias of heron_py.api.serializer."""

from heron_py.api.serializer import IHeronSerializer, MsgpackSerializer, PythonSerializer, default_serializer

__all__ = ["IHeronSerializer", "MsgpackSerializer", "PythonSerializer", "default_serializer"]
