"""Alias of heronpy.api.serializer (heron_py.api.serializer)."""

from heronpy.api.serializer import *  # noqa: F403
