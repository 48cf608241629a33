"""Alias of heron_py.api.api_constants."""

from heron_py.api.api_constants import *  # noqa: F403
