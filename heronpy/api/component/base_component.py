"""Alias of heron_py.api.component.base_component."""

from heron_py.api.component.base_component import BaseComponent

__all__ = ["BaseComponent"]
