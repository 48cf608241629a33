"""Size caps on log files: rotate a file past its cap, keeping ``N`` old ones (``x.log.1`` is the
newest, ``x.log.N`` the oldest; the one past N is deleted).

Two ways to rotate, by who holds the file:

- ``copytruncate`` for a file other processes hold open and append to (the daemons' and tasks'
  logs: the executor opens them and hands them to its children as stdout and stderr, and the
  fork server opens them with ``O_APPEND``). A rename would not help there: the writers would go
  on writing to the renamed file. So the content is copied to ``.1`` and the file is truncated in
  place; with ``O_APPEND`` every write goes to the current end, so the next line lands at offset
  0 of the emptied file (without ``O_APPEND`` the writer would leave a hole up to its old offset:
  every log heron-py opens for a child is opened for appending).
- ``rotate_by_rename`` for a file its only writer owns (``metrics.jsonl``, which the metrics
  manager opens for each line): rename it to ``.1``; the next write creates a new one. Nothing
  is lost.

The decisions (is a file over its cap, which renames shift the old files) are pure functions; the
functions that act on files are thin around them.

Logs carry tuple data (a task's prints, its exceptions' values): every log heron-py writes, the
rotated copies too, is its user's alone (``LOG_MODE``, 0600), in folders that are too
(``TopologyPaths.private``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

# the caps, read from a topology's config, are the config table's (heron_py/common/config.py)
from heron_py.common.config import LogCaps

LOG_MODE = 0o600
# the executor looks at its container's logs this often (in the supervision loop it already has)
CHECK_EVERY_S = 2.0
# the logs the executor's sweep rotates by copy-then-truncate; metrics.jsonl is not one of them
# (its owner rotates it by rename) and neither are the rotated files themselves (x.log.1)
LOG_GLOB = "*.log"


def open_log(path: Path) -> BinaryIO:
    """``path`` opened for appending, mode 0600 (a file an older heron-py left readable to
    others is narrowed too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, LOG_MODE)
    try:
        os.fchmod(fd, LOG_MODE)
    except OSError:
        os.close(fd)
        raise
    return os.fdopen(fd, "ab")


def over_cap(size: int, caps: LogCaps) -> bool:
    return size > caps.max_bytes


def rotated(path: Path, i: int) -> Path:
    """The i-th old file of ``path`` (1 is the newest)."""
    return path.with_name(f"{path.name}.{i}")


def shift_plan(path: Path, keep: int) -> list[tuple[Path, Path]]:
    """The renames that make room for a new ``.1``, oldest first so none overwrites a file still
    to be moved: ``.N-1 -> .N``, ..., ``.1 -> .2``. ``.N`` itself is overwritten by the first
    rename (or deleted by the caller when N is 1)."""
    return [(rotated(path, i), rotated(path, i + 1)) for i in range(keep - 1, 0, -1)]


def _shift(path: Path, keep: int) -> None:
    if keep <= 0:
        return
    rotated(path, keep).unlink(missing_ok=True)
    for src, dst in shift_plan(path, keep):
        try:
            os.replace(src, dst)
        except FileNotFoundError:
            pass  # fewer old files than kept so far


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def copytruncate(path: Path, caps: LogCaps) -> bool:
    """Rotates ``path`` when it is over its cap, for writers that hold it open with O_APPEND;
    True when it rotated.

    What it can lose: lines the writers append between the end of the copy and the truncate
    (microseconds for a log line or two). That is logrotate's copytruncate trade, accepted here:
    the only alternatives are to stop or signal every writer to reopen its file (the tasks run
    user code, which has no such hook) or a file system specific collapse of the copied range.
    """
    size = _size(path)
    if size is None or not over_cap(size, caps):
        return False
    _shift(path, caps.keep)
    if caps.keep > 0:
        # the copy takes what is there now, including lines appended since the stat; made 0600
        # before a byte is in it
        target = rotated(path, 1)
        target.unlink(missing_ok=True)
        with path.open("rb") as src, os.fdopen(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, LOG_MODE),
                                               "wb") as dst:
            shutil.copyfileobj(src, dst)
    # O_WRONLY without O_TRUNC then ftruncate: the writers' descriptors stay valid and their
    # next O_APPEND write goes to offset 0
    fd = os.open(path, os.O_WRONLY)
    try:
        os.ftruncate(fd, 0)
    finally:
        os.close(fd)
    return True


def rotate_by_rename(path: Path, caps: LogCaps) -> bool:
    """Rotates ``path`` when it is over its cap by renaming it to ``.1``, for a file whose only
    writer is the caller and which it opens for each write (or has closed): nothing is lost; True
    when it rotated."""
    size = _size(path)
    if size is None or not over_cap(size, caps):
        return False
    _shift(path, caps.keep)
    if caps.keep > 0:
        os.replace(path, rotated(path, 1))
    else:
        path.unlink(missing_ok=True)
    return True


def rotate_logs(files: Iterable[Path], caps: LogCaps) -> tuple[list[Path], list[str]]:
    """Copy-then-truncate rotation of every file over its cap: the files rotated, and one line
    per file that could not be (a full disk, a permission), so one bad file stops none of the
    others and the caller decides how to report."""
    done: list[Path] = []
    errors: list[str] = []
    for f in files:
        try:
            if copytruncate(f, caps):
                done.append(f)
        except OSError as e:
            errors.append(f"cannot rotate log {f}: {e.strerror or e}")
    return done, errors


def logs_in(folder: Path) -> list[Path]:
    """The logs the executor rotates in a container's logs folder: ``*.log`` files, not the
    rotated ones and not metrics.jsonl."""
    try:
        return sorted(p for p in folder.glob(LOG_GLOB) if p.is_file())
    except OSError:
        return []
