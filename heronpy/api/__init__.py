"""Alias of the matching heron_py.api package."""
