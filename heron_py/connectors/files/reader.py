"""Reading a folder of files line by line from (line number, byte offset) positions.

``LinePositions`` is pure: the base's ``ReplayableSource`` with a file as the partition and the
line number as the offset (the commit point advances only over a contiguous run of acked lines;
a failed line is replayed with backoff) and the byte offset where each line in flight starts,
so a committed line number maps back to the byte to seek to.

``FolderReader`` does the I/O: the files of ``folder`` matching ``pattern`` that this task
owns (``stable_owner``: a file keeps its owner when others appear), rescanned every poll period
so new files are picked up; a line is read only once its newline is written (a writer's partial
last line waits); a file that shrank below its position was truncated, and a file whose name now
holds another file (a new inode: rotated or replaced) is read again from its start once the old
one is read to its end (each logged once, and ``on_reset(file)`` called so a tracker forgets the
old content's lines); a file that cannot be opened (permissions) is logged once and tried again
at each scan while the other files go on."""

from __future__ import annotations

import fnmatch
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, NamedTuple

from heron_py.connectors.base import ReplayableSource
from heron_py.connectors.common import stable_owner

Position = tuple[int, int]  # (line number of the next line to read, its byte offset)

# How many bytes before a saved position its fingerprint covers: enough that two different log
# files rarely share them (a timestamp, a counter), few enough to read on every commit.
FINGERPRINT_BYTES = 64


def fingerprint(data: bytes) -> str:
    """A short digest of the bytes before a position, saved with it: an inode number can be
    reused by the file that replaced the old one, the bytes just read rarely are."""
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def read_fingerprint(fd: int, byte: int) -> str | None:
    """The fingerprint of an open file's last ``FINGERPRINT_BYTES`` bytes before ``byte`` (fewer
    near the start), or None when it is shorter."""
    start = max(0, byte - FINGERPRINT_BYTES)
    n = byte - start
    data = os.pread(fd, n, start)
    return fingerprint(data) if len(data) == n else None


class Line(NamedTuple):
    """One line read. A named tuple, not a frozen dataclass: one is made per line read, and a
    frozen dataclass's ``__init__`` sets each field through ``object.__setattr__`` (4 % of the
    spout's samples, py-spy)."""

    file: str  # the name relative to the folder
    number: int  # from 0
    start: int  # byte offset of its first byte
    end: int  # byte offset after its newline
    text: str


@dataclass
class LinePositions:
    """The base's ``ReplayableSource`` over (file, line number), plus the byte offset where each
    line in flight starts, so a committed line number maps back to the byte to seek to."""

    source: ReplayableSource[str]
    starts: dict[str, dict[int, int]] = field(default_factory=dict)

    def assign(self, file: str, pos: Position) -> None:
        if file not in self.source.trackers:
            self.source.assign(file, pos[0])
            self.starts[file] = {pos[0]: pos[1]}

    def emitted(self, line: Line) -> tuple[str, int] | None:
        return self.emitted_many([line])[0]

    def emitted_many(self, lines: list[Line]) -> list[tuple[str, int] | None]:
        """``emitted`` for a read's lines (a run of lines per file, in order): one
        ``ReplayableSource.emitted_many`` pass per file's run. The ids in the lines' order."""
        ids: list[tuple[str, int] | None] = []
        i, n = 0, len(lines)
        while i < n:
            file = lines[i].file
            j = i
            while j < n and lines[j].file == file:
                j += 1
            run = lines[i:j]
            keys = self.source.emitted_many(file, [(ln.number, ln) for ln in run])
            st = self.starts.get(file)  # made by assign, as the tracker that gives ids is
            if st is not None:
                for ln, key in zip(run, keys, strict=True):
                    if key is not None:
                        st[ln.number] = ln.start
                        st[ln.number + 1] = ln.end  # where the next line starts: the commit point after it
            ids.extend(keys)
            i = j
        return ids

    def commit(self) -> dict[str, Position]:
        """Advances every file's commit point over its contiguous acked lines; returns the
        files that advanced with their new (line, byte) positions."""
        advanced = self.source.commits()
        self.source.committed(advanced)
        out: dict[str, Position] = {}
        for file, nxt in advanced.items():
            st = self.starts[file]
            out[file] = (nxt, st[nxt])
            for k in [k for k in st if k < nxt]:
                del st[k]
        return out

    def committed(self) -> dict[str, Position]:
        return {f: (t.committed, self.starts[f][t.committed]) for f, t in self.source.trackers.items()}

    def forget(self, file: str) -> None:
        self.source.revoke(file)
        self.starts.pop(file, None)


class FolderReader:
    """The owned files of a folder and where each is read to."""

    def __init__(self, folder: str, pattern: str, index: int, tasks: int, encoding: str,
                 log: Callable[[str, str], None], where: str,
                 initial: Callable[[str], Position] = lambda _f: (0, 0),
                 on_reset: Callable[[str], None] = lambda _f: None) -> None:
        self.folder, self.pattern = folder, pattern
        self.initial = initial  # where a newly found file is read from
        self.on_reset = on_reset  # a file's content was replaced: its line numbers start again
        self.index, self.tasks = index, tasks
        self.encoding = encoding
        self.log, self.where = log, where
        self.positions: dict[str, Position] = {}  # next line to read, per owned file
        self._handles: dict[str, IO[bytes]] = {}
        self._order: list[str] = []
        self._next = 0
        self.missing_logged = False
        # file -> the error logged for it: logged once, tried again at the next scan, and a line
        # when it is readable again (an error on every read would flood the task's log)
        self.unreadable: dict[str, str] = {}
        self._blocked: set[str] = set()  # unreadable until the next scan

    def scan(self) -> list[str]:
        """Picks up new files; returns the names of the files that appeared."""
        try:
            names = sorted(e.name for e in os.scandir(self.folder)
                           if e.is_file() and fnmatch.fnmatch(e.name, self.pattern) and not e.name.startswith("."))
        except FileNotFoundError:
            if not self.missing_logged:
                self.log(f"{self.where}: folder {self.folder} does not exist; waiting for it", "warn")
                self.missing_logged = True
            return []
        self.missing_logged = False
        mine = [n for n in names if stable_owner(n, self.tasks) == self.index]
        new = [n for n in mine if n not in self.positions]
        for n in new:
            self.positions[n] = self.initial(n)
        gone = [n for n in self.positions if n not in mine]
        for n in gone:
            self._close(n)
            del self.positions[n]
            self.unreadable.pop(n, None)
        self._order = mine
        self._blocked.clear()
        return new

    def read(self, max_lines: int, allowed: Callable[[str], bool] = lambda _f: True) -> list[Line]:
        """Up to ``max_lines`` complete lines, taking the files in turn."""
        out: list[Line] = []
        files = [f for f in self._order if f in self.positions and f not in self._blocked and allowed(f)]
        for i in range(len(files)):
            if len(out) >= max_lines:
                break
            f = files[(self._next + i) % len(files)]
            out.extend(self._read_file(f, max_lines - len(out)))
        self._next += 1
        return out

    def _handle(self, file: str) -> IO[bytes] | None:
        h = self._handles.get(file)
        if h is None:
            try:
                h = open(os.path.join(self.folder, file), "rb")  # noqa: SIM115 (kept open between reads)
            except FileNotFoundError:
                return None
            except OSError as e:
                self._blocked.add(file)
                err = f"{type(e).__name__}: {e.strerror or e}"
                if self.unreadable.get(file) != err:
                    self.unreadable[file] = err
                    self.log(f"{self.where}: file {file} in {self.folder} is unreadable ({err}); expected a file "
                             f"this process may read; skipping it and trying again every poll", "error")
                return None
            if self.unreadable.pop(file, None) is not None:
                self.log(f"{self.where}: file {file} is readable again; reading it from line "
                         f"{self.positions[file][0]}", "info")
            self._handles[file] = h
        return h

    def _replaced(self, file: str, h: IO[bytes]) -> bool:
        """Whether the name now holds another file than the open one (renamed away and a new
        one written, as a log rotation does)."""
        try:
            st = os.stat(os.path.join(self.folder, file))
        except OSError:
            return False  # gone or not reachable now: the next scan decides
        old = os.fstat(h.fileno())
        return (st.st_ino, st.st_dev) != (old.st_ino, old.st_dev)

    def _reset(self, file: str, why: str) -> Position:
        self.log(f"{self.where}: file {file} {why}; reading it again from its start", "warn")
        self.positions[file] = (0, 0)
        self.on_reset(file)
        return 0, 0

    def _read_file(self, file: str, limit: int) -> list[Line]:
        h = self._handle(file)
        if h is None:
            return []
        number, pos = self.positions[file]
        size = os.fstat(h.fileno()).st_size
        if size < pos:
            number, pos = self._reset(file, f"shrank to {size} bytes, below the position {pos} (truncated or "
                                            f"replaced)")
        if size == pos:
            # at the end of the open file: a new file under its name is read only now, so the
            # old one's last lines are not lost
            if self._replaced(file, h):
                self._close(file)
                self._reset(file, "was replaced by a new file (another inode under its name)")
                return self._read_file(file, limit)
            return []
        h.seek(pos)
        out: list[Line] = []
        while len(out) < limit:
            raw = h.readline()
            if not raw.endswith(b"\n"):
                break  # at the end, or a partial line still being written: read again later
            end = pos + len(raw)
            text = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
            out.append(Line(file, number, pos, end, text.decode(self.encoding, errors="replace")))
            number, pos = number + 1, end
        self.positions[file] = (number, pos)
        return out

    def inode(self, file: str) -> int | None:
        """The inode of the open file (kept with a position, so a restart can tell that the name
        now holds another file), or None when it is not open."""
        h = self._handles.get(file)
        return os.fstat(h.fileno()).st_ino if h is not None else None

    def fingerprint(self, file: str, byte: int) -> str | None:
        """The fingerprint of the open file's bytes before ``byte`` (kept with a position, so a
        restart can tell another file's content even under a reused inode), or None."""
        h = self._handles.get(file)
        return read_fingerprint(h.fileno(), byte) if h is not None else None

    def _close(self, file: str) -> None:
        h = self._handles.pop(file, None)
        if h is not None:
            h.close()

    def close(self) -> None:
        for f in list(self._handles):
            self._close(f)
