"""Alias of heronpy.api.component.base_component (heron_py.api.component.base_component)."""

from heronpy.api.component.base_component import *  # noqa: F403
