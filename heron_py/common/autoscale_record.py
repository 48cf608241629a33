"""The health manager's record, ``logs/autoscale.jsonl`` in the topology's logs folder, read: one
JSON object per line, one line per step of ``heron-py autoscale``, which writes it
(heron_py/cli/autoscale_log.py says what a step holds). Three readers share it: ``heron-py
status`` (through autoscale_log.last_entries), the master's web page (``GET
/topologies/autoscale``, topology_master/ui_api.py) and the metrics manager of container 0, which
exports the steps to Prometheus (metrics_manager/prom.py). Here, in the foundation, because the
daemons import nothing of heron_py above it (tests/unit/project/test_structure.py).

A line that is not a JSON object (cut short by a full disk, edited by hand) is not a step: every
reader skips it, and ``StepFollower`` counts it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, BinaryIO

from heron_py.common.logrotate import rotated

LOG_FILE = "autoscale.jsonl"
# what StepFollower reads of the record per call: a scrape reads what was appended since the
# last one (a few kilobytes a step); a backlog is read over the next calls, not in one
MAX_READ_BYTES = 1 << 20
# no step is this long: a line longer than this (no newline in it) is dropped as unreadable
MAX_LINE_BYTES = 1 << 20


def parse_step(line: bytes) -> dict[str, Any] | None:
    """One line of the record as a step, or None when it is not one."""
    try:
        doc = json.loads(line)
    except ValueError:  # UnicodeDecodeError is one
        return None
    return doc if isinstance(doc, dict) else None


def last_steps(path: Path, n: int) -> list[dict[str, Any]]:
    """The last ``n`` steps recorded in ``path``, oldest first (from the rotated file too when the
    current one has fewer); a line being written is not one yet, and a line that is not a step
    is skipped, with one more line read for each (once: a run of them can make fewer than ``n``
    come back although the files hold more)."""
    if n <= 0:
        return []
    steps, full = _last(path, n)
    if full and len(steps) < n:
        steps, _ = _last(path, n + n - len(steps))
    return steps[-n:]


def _last(path: Path, n: int) -> tuple[list[dict[str, Any]], bool]:
    """The steps of the last ``n`` lines, and whether there were ``n`` (more may lie before)."""
    lines = _last_lines(path, n)
    if len(lines) < n:
        lines = _last_lines(rotated(path, 1), n - len(lines)) + lines
    return [doc for doc in map(parse_step, lines) if doc is not None], len(lines) == n


def _last_lines(path: Path, n: int, block: int = 64 * 1024) -> list[bytes]:
    """The last ``n`` whole lines of ``path``, read from its end."""
    try:
        f = path.open("rb")
    except FileNotFoundError:
        return []
    with f:
        pos = f.seek(0, os.SEEK_END)
        data = b""
        while pos > 0 and data.count(b"\n") <= n:
            step = min(block, pos)
            pos -= step
            f.seek(pos)
            data = f.read(step) + data
    lines = data.split(b"\n")[:-1]  # after the last newline: a line not finished yet
    if pos > 0:
        lines = lines[1:]  # the first may be the end of a line read only in part
    return lines[-n:]


class StepFollower:
    """The steps appended to the record since this follower was made, as ``tail -F`` follows a
    file: ``new_steps()`` returns those appended since its last call, oldest first.

    It holds the file open, so a rotation (its writer renames it to ``.1`` and creates a new one
    at its next step) loses nothing: what the renamed file got before the rename is read from the
    open file, then the new file from its start. The writer rotates before it appends, so once
    the path names another file the held one is complete. A record that does not exist yet is
    followed from its first line once it does. A record rotated twice between two calls loses
    the steps of the file in between (a file holds up to the topology's log cap, 100 MB by
    default, and a step is a few kilobytes every interval: no scrape is that late)."""

    def __init__(self, path: Path, max_read: int = MAX_READ_BYTES) -> None:
        self.path = path
        self.unreadable = 0  # lines that were not a step
        self.rotations_seen = 0
        self._max_read = max_read
        self._file: BinaryIO | None = None
        self._partial = b""  # a line read in part: its end comes with a later read
        self._drop_first = False  # the file was opened mid-line: that line's end is not a line
        try:
            self._file = path.open("rb")
        except OSError:  # not there yet (or not readable now): followed from its first line once it is
            return
        end = self._file.seek(0, os.SEEK_END)
        if end > 0:
            self._file.seek(end - 1)
            self._drop_first = self._file.read(1) != b"\n"

    def new_steps(self) -> list[dict[str, Any]]:
        steps, done = self._read()
        if not done:
            return steps  # the rest of the held file first, at the next call
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return steps  # rotated with no old file kept, and no step since: the held file is complete
        if self._file is not None:
            held = os.fstat(self._file.fileno())
            if (held.st_dev, held.st_ino) == (st.st_dev, st.st_ino):
                return steps
            more, done = self._read()  # appended between the read above and the rename
            steps += more
            if not done:
                return steps
            if self._partial:
                self.unreadable += 1  # the held file ended in the middle of a line: it will not end
            self.close()
            self.rotations_seen += 1
        self._file, self._partial, self._drop_first = self.path.open("rb"), b"", False
        more, _ = self._read()
        return steps + more

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def _read(self) -> tuple[list[dict[str, Any]], bool]:
        """The whole lines of the held file read now (up to ``max_read`` bytes), as steps, and
        whether its end was reached."""
        if self._file is None:
            return [], True
        data = self._file.read(self._max_read)
        done = len(data) < self._max_read
        *lines, self._partial = (self._partial + data).split(b"\n")
        if self._drop_first and lines:
            lines, self._drop_first = lines[1:], False
        if len(self._partial) > MAX_LINE_BYTES:
            self._partial, self._drop_first = b"", True  # the rest of it, up to its newline, is dropped too
            self.unreadable += 1
        steps = []
        for line in lines:
            doc = parse_step(line)
            if doc is None:
                self.unreadable += 1
            else:
                steps.append(doc)
        return steps, done
