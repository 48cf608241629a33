"""The test capture reader against a file that is being appended to while it reads."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from heron_py.testing.local import read_capture


def test_a_half_written_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    first = json.dumps({"task": 1, "values": ["a", 1]}) + "\n"
    half = json.dumps({"task": 1, "values": ["b", 2]})
    (tmp_path / "count-1.jsonl").write_text(first + half[:20])
    assert [r["values"] for r in read_capture(tmp_path, ["count"])["count"]] == [["a", 1]]


def test_reads_racing_a_writer_that_splits_every_line_see_only_whole_lines(tmp_path: Path) -> None:
    """Each record goes out as two writes cut inside the line, as a buffered writer's partial
    flush does; every read must parse and see a prefix of what was written."""
    n = 10_000
    fd = os.open(tmp_path / "count-3.jsonl", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(n):
                line = (json.dumps({"task": 3, "values": ["w", i]}) + "\n").encode()
                os.write(fd, line[:-3])
                os.write(fd, line[-3:])
        finally:
            os.close(fd)
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    seen = 0
    while not done.is_set():
        rows = read_capture(tmp_path, ["count"])["count"]
        assert [r["values"][1] for r in rows[seen:]] == list(range(seen, len(rows)))
        seen = len(rows)
    t.join()
    assert [r["values"][1] for r in read_capture(tmp_path, ["count"])["count"]] == list(range(n))
