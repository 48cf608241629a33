"""The two ways a multilang conversation fails."""

from __future__ import annotations


class ProtocolError(ValueError):
    """The subprocess sent something the protocol does not allow (pure: no process info)."""


class ShellError(RuntimeError):
    """The subprocess failed (protocol error, exit, silence); the message names the command,
    the pid and the tail of its stderr. The task dies with it and is restarted like any task."""
