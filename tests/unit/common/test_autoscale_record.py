"""The health manager's record read (heron_py/common/autoscale_record.py): the last steps, and
the steps appended since a follower was made, through a rotation, a line being written and a
line that is not a step."""

from __future__ import annotations

import json
import os
from pathlib import Path

from heron_py.cli.autoscale_log import AutoscaleLog
from heron_py.common.autoscale_record import StepFollower, last_steps, parse_step
from heron_py.common.config import LogCaps


def _line(t: float) -> bytes:
    return json.dumps({"time": t, "decision": "none"}).encode() + b"\n"


def _append(path: Path, data: bytes) -> None:
    with path.open("ab") as f:
        f.write(data)


def test_a_line_that_is_not_a_json_object_is_not_a_step() -> None:
    assert parse_step(b'{"time": 1}') == {"time": 1}
    assert [parse_step(x) for x in (b"", b"[1, 2]", b'"step"', b'{"time": 1', b"\xff\xfe")] == [None] * 5


def test_last_steps_skip_a_bad_line_and_a_line_being_written(tmp_path: Path) -> None:
    record = tmp_path / "autoscale.jsonl"
    assert last_steps(record, 5) == []  # no record yet
    record.write_bytes(_line(1) + b"not json\n" + _line(2) + b"[3]\n" + _line(4) + b'{"time": 5')
    assert [s["time"] for s in last_steps(record, 10)] == [1, 2, 4]
    # the last 2 lines hold one step: one line more is read for the bad one
    assert [s["time"] for s in last_steps(record, 2)] == [2, 4]
    assert [s["time"] for s in last_steps(record, 1)] == [4]
    # for the last 3, the line read for the bad one is bad too: once only, so two steps of three
    assert [s["time"] for s in last_steps(record, 3)] == [2, 4]
    assert last_steps(record, 0) == []


def test_a_follower_counts_from_its_making_and_reads_each_step_once(tmp_path: Path) -> None:
    record = tmp_path / "autoscale.jsonl"
    record.write_bytes(_line(1) + _line(2))
    f = StepFollower(record)
    assert f.new_steps() == []  # recorded before it was made
    _append(record, _line(3) + b"garbage\n" + _line(4))
    assert [s["time"] for s in f.new_steps()] == [3, 4]
    assert f.unreadable == 1
    assert f.new_steps() == []
    # a line written in two parts is one step, read once it is whole
    whole = _line(5)
    _append(record, whole[:7])
    assert f.new_steps() == []
    _append(record, whole[7:])
    assert [s["time"] for s in f.new_steps()] == [5]
    assert f.unreadable == 1
    f.close()


def test_a_follower_made_while_a_line_is_written_skips_that_line_quietly(tmp_path: Path) -> None:
    record = tmp_path / "autoscale.jsonl"
    whole = _line(2)
    record.write_bytes(_line(1) + whole[:5])
    f = StepFollower(record)
    _append(record, whole[5:] + _line(3))
    assert ([s["time"] for s in f.new_steps()], f.unreadable) == ([3], 0)


def test_a_record_made_after_the_follower_is_read_from_its_first_line(tmp_path: Path) -> None:
    record = tmp_path / "logs" / "autoscale.jsonl"
    f = StepFollower(record)
    assert f.new_steps() == []
    record.parent.mkdir()
    record.write_bytes(_line(1) + _line(2))
    assert [s["time"] for s in f.new_steps()] == [1, 2]


def test_a_rotation_loses_no_step_and_repeats_none(tmp_path: Path) -> None:
    """The record's own writer rotates it (rename to .1, then a new file) under tiny caps, every
    third step or so, and the follower reads every third step: every step appended after it was
    made comes out once, in order."""
    record = tmp_path / "autoscale.jsonl"
    log = AutoscaleLog(record, LogCaps(max_bytes=200, keep=1))
    log.append({"time": 0})
    f = StepFollower(record)
    seen: list[float] = []
    for t in range(1, 40):
        log.append({"time": t, "decision": "none", "pad": "x" * 40})
        if t % 3 == 0:  # some reads see one rotation since the last, some none
            seen += [s["time"] for s in f.new_steps()]
    seen += [s["time"] for s in f.new_steps()]
    assert seen == list(range(1, 40))
    assert os.path.exists(f"{record}.1") and f.unreadable == 0
    assert f.rotations_seen >= 10


def test_a_rotation_that_kept_no_old_file_still_reads_the_held_ones_end(tmp_path: Path) -> None:
    record = tmp_path / "autoscale.jsonl"
    log = AutoscaleLog(record, LogCaps(max_bytes=10, keep=0))  # each append deletes the one before
    log.append({"time": 0})
    f = StepFollower(record)
    _append(record, _line(1))  # into the held file, then it is deleted and a new one made
    log.append({"time": 2})
    assert [s["time"] for s in f.new_steps()] == [1, 2]


def test_a_backlog_is_read_over_several_calls(tmp_path: Path) -> None:
    record = tmp_path / "autoscale.jsonl"
    record.touch()
    f = StepFollower(record, max_read=64)
    _append(record, b"".join(_line(t) for t in range(10)))  # 36 bytes a line
    first = f.new_steps()
    assert 0 < len(first) < 10
    rest: list[float] = []
    while batch := f.new_steps():
        rest += [s["time"] for s in batch]
    assert [s["time"] for s in first] + rest == list(range(10))
