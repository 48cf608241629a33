"""The CLI's own errors: each is one line after ``heron-py: error:``. Apart from the modules that
raise them so that a command imports only what it runs (the ``heron-py`` process of a ``kill``
or a ``status`` imports neither the submit path nor the master's admin client)."""

from __future__ import annotations


class SubmitError(Exception):
    """A topology that cannot be submitted, or a command about one that is not running."""


class AdminError(Exception):
    """The topology master refused a command or could not be reached."""
