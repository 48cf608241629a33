"""Alias of heronpy.api.component.component_spec (heron_py.api.component.component_spec)."""

from heronpy.api.component.component_spec import *  # noqa: F403
