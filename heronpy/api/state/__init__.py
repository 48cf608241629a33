"""Alias of heron_py.api.state."""
