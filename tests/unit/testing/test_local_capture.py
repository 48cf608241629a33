"""run_local's incremental capture reader: each read parses only what was appended since the
last, keeps whole-line semantics, and picks up new and rewritten files."""

from __future__ import annotations

import json
from pathlib import Path

from heron_py.testing.local import CaptureReader, split_complete


def _line(task: int, i: int) -> bytes:
    return (json.dumps({"task": task, "values": ["w", i]}) + "\n").encode()


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def test_split_complete_keeps_a_half_written_last_line_for_later() -> None:
    assert split_complete(b"") == ([], 0)
    assert split_complete(b'{"a"') == ([], 0)
    assert split_complete(b"x\n") == ([b"x"], 2)
    assert split_complete(b"x\ny\nz") == ([b"x", b"y"], 4)


def test_each_read_takes_only_the_bytes_appended_since_the_last(tmp_path: Path) -> None:
    f = tmp_path / "count-3.jsonl"
    reader = CaptureReader(tmp_path, ["count"])
    assert reader.read() == {"count": []}  # no file yet
    _append(f, b"".join(_line(3, i) for i in range(1000)))
    assert [r["values"][1] for r in reader.read()["count"]] == list(range(1000))
    size = f.stat().st_size
    assert reader.bytes_read == size
    third = _line(3, 1000)
    _append(f, third[:10])  # a writer's partial flush: not a row yet
    assert len(reader.read()["count"]) == 1000
    _append(f, third[10:] + _line(3, 1001))
    rows = reader.read()["count"]
    assert [r["values"][1] for r in rows] == list(range(1002))
    # every byte was read once but the 10 of the cut line, read again with its rest
    assert reader.bytes_read == f.stat().st_size + 10
    before = reader.bytes_read
    assert len(reader.read()["count"]) == 1002
    assert reader.bytes_read == before  # nothing appended: nothing read


def test_rows_come_file_by_file_and_a_new_file_is_picked_up(tmp_path: Path) -> None:
    reader = CaptureReader(tmp_path, ["count", "split"])
    _append(tmp_path / "count-5.jsonl", _line(5, 0))
    assert [r["task"] for r in reader.read()["count"]] == [5]
    _append(tmp_path / "count-4.jsonl", _line(4, 0) + _line(4, 1))
    _append(tmp_path / "count-5.jsonl", _line(5, 1))
    _append(tmp_path / "split-2.jsonl", _line(2, 0))
    got = reader.read()
    assert [(r["task"], r["values"][1]) for r in got["count"]] == [(4, 0), (4, 1), (5, 0), (5, 1)]
    assert [r["task"] for r in got["split"]] == [2]


def test_a_file_written_anew_is_read_from_its_start(tmp_path: Path) -> None:
    f = tmp_path / "sink-1.jsonl"
    reader = CaptureReader(tmp_path, ["sink"])
    f.write_bytes(_line(1, 0) + _line(1, 1) + _line(1, 2))
    assert len(reader.read()["sink"]) == 3
    f.write_bytes(_line(1, 7))  # shorter than what was read: another run's file
    assert [r["values"][1] for r in reader.read()["sink"]] == [7]
