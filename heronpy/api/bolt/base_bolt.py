"""Alias of heron_py.api.bolt.base_bolt."""

from heron_py.api.bolt.base_bolt import BaseBolt

__all__ = ["BaseBolt"]
