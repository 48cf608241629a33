"""Durable, all-or-nothing file writes.

A reader, or the next start after a crash or power loss, sees either the old file or the new
one, whole: the data goes to a temporary file in the same folder (so the rename cannot cross
file systems), is fsynced, replaces the target with ``os.replace`` (atomic on POSIX), and the
folder is fsynced so the rename itself survives a crash.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# temporary files start with a dot, so listings that skip hidden names never see them
TMP_PREFIX = "."


def fsync_dir(folder: Path) -> None:
    """Makes the folder's entries (a rename, a new file) durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, *, mode: int | None = None, prefix: str = TMP_PREFIX) -> None:
    """Writes ``data`` to ``path`` all or nothing; ``mode`` (e.g. 0o600) is set before any
    byte is written, so a private file is never readable by others, not even half written.
    ``prefix`` starts the temporary file's name (a store that sweeps its leftovers names it)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f"{prefix}{path.name}.")
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # the old file is untouched; only the temporary one has to go
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), mode=mode)
