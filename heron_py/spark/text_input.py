"""A local text file read by the Python workers themselves, as ``SparkContext.textFile`` reads it.

``textFile`` reads lines in the JVM and sends each to Python as its own length-prefixed string,
which PySpark decodes one at a time: for a file of short lines that costs more than the spout's
routing of them. Under a local master (the workers share this file system), a plain
uncompressed file is instead read here, in the same splits and with the same lines:

- splits as Hadoop's ``FileInputFormat`` makes them for ``textFile(path)`` (``minPartitions`` =
  min(default parallelism, 2), 32 MiB blocks of the local file system, the last split up to
  1.1 times the others);
- lines as Hadoop's ``LineRecordReader`` gives them: ended by ``\\n``, ``\\r\\n`` or a lone
  ``\\r``, terminators dropped, no line after a final terminator; a line belongs to the split
  in which it starts;
- text decoded as UTF-8 with U+FFFD for bytes that are not UTF-8 (Hadoop's ``Text``).

Compressed files, folders and globs are left to ``textFile``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

LOCAL_BLOCK = 32 * 1024 * 1024  # Hadoop's fs.local.block.size default
SPLIT_SLOP = 1.1  # FileInputFormat: the last split may be this much larger than the others
CHUNK = 4 * 1024 * 1024  # bytes read at a time: bounds a worker's memory for one split
# what Hadoop's codecs would decompress: such files go to textFile
COMPRESSED = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst", ".zstd", ".br", ".xz", ".lzo")
_TERMINATOR = re.compile(r"\r\n|\r|\n")
_BYTE_TERMINATOR = re.compile(rb"[\r\n]")


def readable_here(path: Path) -> bool:
    """Whether this module reads ``path`` (else textFile does): one plain, uncompressed file."""
    return path.is_file() and not path.name.lower().endswith(COMPRESSED)


def splits(size: int, min_partitions: int, block: int = LOCAL_BLOCK) -> list[tuple[int, int]]:
    """Byte ranges [start, end) of a file of ``size`` bytes, as FileInputFormat.getSplits."""
    if size == 0:
        return [(0, 0)]
    goal = size // max(min_partitions, 1)
    split = max(1, min(goal, block))
    out: list[tuple[int, int]] = []
    left = size
    while left / split > SPLIT_SLOP:
        out.append((size - left, size - left + split))
        left -= split
    if left:
        out.append((size - left, size))
    return out


def _line_start(f: BinaryIO, pos: int, size: int) -> int:
    """The first position >= ``pos`` where a line starts (or ``size``): just after a ``\n``, a
    ``\r\n``, or a ``\r`` not followed by ``\n``."""
    if pos <= 0:
        return 0
    if pos >= size:
        return size
    f.seek(pos - 1)
    at = pos - 1
    while True:
        block = f.read(64 * 1024)
        if not block:
            return size
        m = _BYTE_TERMINATOR.search(block)
        if m is None:
            at += len(block)
            continue
        t = at + m.start()
        if m.group() == b"\n":
            return t + 1
        after = block[m.start() + 1:m.start() + 2] or f.read(1)  # the file is right after the block
        return t + 2 if after == b"\n" else t + 1


def read_lines(path: str, start: int, end: int) -> Iterator[list[str]]:
    """The lines of the split [start, end) of ``path``, each as a one-value row. As in Hadoop, a
    split other than the first skips the line under its start, and reads on past its end to
    finish its last line: a line belongs to the split in which it starts after the split's
    start and at or before its end (the first split: from 0 on)."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        first = 0 if start == 0 else _line_start(f, start + 1, size)
        stop = _line_start(f, end + 1, size)
        f.seek(first)
        left, rest = stop - first, b""
        bom = first == 0
        while left > 0 or rest:
            block = f.read(min(CHUNK, left)) if left > 0 else b""
            # a file cut short while it is read ends here, with what was read
            left = left - len(block) if block else 0
            data = rest + block
            if left > 0:
                # complete lines only: up to the last \n (a \r before it is part of \r\n)
                cut = data.rfind(b"\n") + 1
                data, rest = data[:cut], data[cut:]
                if not data:
                    continue
            else:
                rest = b""
            text = data.decode("utf-8", "replace")
            if bom:  # Hadoop skips a UTF-8 byte order mark at the start of the file
                bom, text = False, text.removeprefix("\ufeff")
            lines = text.split("\n") if "\r" not in text else _TERMINATOR.split(text)
            if lines and lines[-1] == "":
                lines.pop()  # the terminator of the last line, not an empty line after it
            for line in lines:
                yield [line]
