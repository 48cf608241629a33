"""Alias of the heron_py.api.connectors.mock package."""
