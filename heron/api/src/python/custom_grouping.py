"""Alias of heronpy.api.custom_grouping (heron_py.api.custom_grouping)."""

from heronpy.api.custom_grouping import *  # noqa: F403
