"""Alias of the heron_py.api.connectors.textfiles package."""
