"""A task's log for the web page: which file, and one page of it, size-limited.

Logs are under ``$HERON_PY_HOME/topologies/NAME/logs/container-K/COMPONENT-TASK.log`` (the
executor writes them). The master reads them where it runs: every container of a local
topology, and on a cluster whatever the shared home holds; a log it cannot see is a 404 that
says where the file is. The page is bytes (a log may be in any encoding), decoded leniently.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MAX_PAGE = 65536  # bytes of log in one answer: enough for a screen, small for the master
DEFAULT_PAGE = 16384


class LogError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def parse_paging(offset_raw: str | None, length_raw: str | None) -> tuple[int | None, int]:
    """(offset, or None for the tail; length) from the query, checked."""
    offset: int | None = None
    if offset_raw is not None:
        try:
            offset = int(offset_raw)
        except ValueError:
            offset = -1
        if offset < 0:
            raise LogError(400, f"parameter offset: expected a whole number of bytes >= 0 (or no offset for "
                                f"the log's tail), found {offset_raw!r}")
    length = DEFAULT_PAGE
    if length_raw is not None:
        try:
            length = int(length_raw)
        except ValueError:
            length = 0
        if not 1 <= length <= MAX_PAGE:
            raise LogError(400, f"parameter length: expected a whole number of bytes from 1 to {MAX_PAGE}, "
                                f"found {length_raw!r}")
    return offset, length


def read_page(path: Path, offset: int | None, length: int) -> dict[str, Any]:
    """``length`` bytes from ``offset``, or the last ``length`` bytes when offset is None."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, 2)
            start = max(0, size - length) if offset is None else min(offset, size)
            f.seek(start)
            data = f.read(length)
    except FileNotFoundError:
        raise LogError(404, f"no log at {path} on the topology master's host (on a cluster without a shared "
                            f"home, the container's host keeps it)") from None
    return {"file": str(path), "size": size, "offset": start, "length": len(data),
            "next_offset": start + len(data), "data": data.decode("utf-8", errors="replace")}
