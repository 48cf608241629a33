"""Durable, all-or-nothing file writes.

A reader, or the next start after a crash or power loss, sees either the old file or the new
one, whole: the data goes to a temporary file in the same folder (so the rename cannot cross
file systems), is fsynced, replaces the target with ``os.replace`` (atomic on POSIX), and the
folder is fsynced so the rename itself survives a crash.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# temporary files start with a dot, so listings that skip hidden names never see them, and with
# "tmp-", so a sweep after a crash tells them from any other hidden file
TMP_PREFIX = ".tmp-"
# what tempfile.mkstemp adds to the prefix: 8 characters of this alphabet (CPython's
# _RandomNameSequence); with the prefix and the target's name, the whole name of our temp files
_RANDOM = r"[a-z0-9_]{8}"
OURS = re.compile(rf"\.tmp-.+\.{_RANDOM}")
# checkpoint storage renames a folder it deletes to this before removing it (a crash mid-delete
# leaves it): .tmp-gone-NAME-<32 hex digits>
GRAVE = re.compile(r"\.tmp-gone-.+-[0-9a-f]{32}")
# before TMP_PREFIX was ".tmp-": ".NAME." + the random part; swept only in folders where every
# hidden file is ours (the local state store)
LEGACY = re.compile(rf"\.[^.].*\.{_RANDOM}")
# another process may be writing a temp file right now (on a shared checkpoint folder, another
# host's): only files untouched this long are leftovers
SWEEP_MIN_AGE_S = 60.0


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


@dataclass(frozen=True)
class SweepTarget:
    folder: Path
    depth: int = 1  # 1: the folder's own entries; 2: also those of its subfolders; ...
    legacy: bool = False  # also the names of before TMP_PREFIX (folders with no hidden files but ours)


def is_leftover(name: str, is_dir: bool, age_s: float, *, legacy: bool = False,
                min_age_s: float = SWEEP_MIN_AGE_S) -> bool:
    """Whether an entry is a temporary file of ours (or a checkpoint folder being deleted) old
    enough that no writer can still be at it (pure)."""
    if age_s < min_age_s:
        return False
    if is_dir:
        return GRAVE.fullmatch(name) is not None
    return OURS.fullmatch(name) is not None or (legacy and LEGACY.fullmatch(name) is not None)


def sweep_temp_files(targets: Iterable[SweepTarget], now: float,
                     min_age_s: float = SWEEP_MIN_AGE_S) -> tuple[list[Path], list[str]]:
    """Removes the leftovers of interrupted atomic writes under ``targets``: the paths removed,
    and one line per entry that could not be. ``now`` is wall-clock time (``time.time()``),
    compared with the entries' times. Symlinks are never followed nor removed."""
    removed: list[Path] = []
    errors: list[str] = []
    for t in targets:
        _sweep(t.folder, t.depth, t.legacy, now, min_age_s, removed, errors)
    return removed, errors


def _sweep(folder: Path, depth: int, legacy: bool, now: float, min_age_s: float,
           removed: list[Path], errors: list[str]) -> None:
    try:
        entries = list(os.scandir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as err:
        errors.append(f"cannot sweep temporary files in {folder}: {err.strerror or err}")
        return
    for ent in entries:
        try:
            if ent.is_symlink():
                continue
            st = ent.stat(follow_symlinks=False)
            is_dir = ent.is_dir(follow_symlinks=False)
            # a file's writer changes its mtime with every write; a folder renamed into a grave
            # keeps its mtime, so its ctime (which the rename sets) counts too
            age = now - (max(st.st_mtime, st.st_ctime) if is_dir else st.st_mtime)
            if is_leftover(ent.name, is_dir, age, legacy=legacy, min_age_s=min_age_s):
                if is_dir:
                    shutil.rmtree(ent.path)
                else:
                    os.unlink(ent.path)
                removed.append(Path(ent.path))
            elif is_dir and depth > 1:
                _sweep(Path(ent.path), depth - 1, legacy, now, min_age_s, removed, errors)
        except FileNotFoundError:
            continue  # another sweep, or its writer, got there first
        except OSError as err:
            errors.append(f"cannot remove temporary file {ent.path}: {err.strerror or err}")
