"""The operator's restore command on the admin wire (``heron-py restore``): one
string both sides agree on, so the CLI needs nothing of the master's code."""

from __future__ import annotations

RESTORE_CLEAN = "clean"


def restore_command(checkpoint_id: int | None) -> str:
    """The admin command of ``heron-py restore``: ``restore ID`` or ``restore clean``."""
    return f"restore {RESTORE_CLEAN if checkpoint_id is None else checkpoint_id}"


def parse_restore(command: str) -> int | None:
    """The checkpoint id of ``restore ID`` (None for ``restore clean``); ValueError says what is wrong."""
    parts = command.split()
    if len(parts) == 2 and parts[0] == "restore":
        if parts[1] == RESTORE_CLEAN:
            return None
        if parts[1].isdigit() and int(parts[1]) > 0:
            return int(parts[1])
    raise ValueError(f"admin command {command!r}: expected 'restore CHECKPOINT_ID' (an int > 0) or "
                     f"'restore {RESTORE_CLEAN}', found {command!r}")
