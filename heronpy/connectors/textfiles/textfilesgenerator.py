"""Alias of heron_py.api.connectors.textfiles.textfilesgenerator."""

from heron_py.api.connectors.textfiles.textfilesgenerator import TextFileGenerator

__all__ = ["TextFileGenerator"]
