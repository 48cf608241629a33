"""Alias of heronpy.api.task_hook (heron_py.api.task_hook)."""

from heronpy.api.task_hook import *  # noqa: F403
