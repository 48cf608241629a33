"""Alias of the heron_py.api.streamlet package."""
