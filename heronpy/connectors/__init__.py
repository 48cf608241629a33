"""Alias of the heron_py.api.connectors package."""
