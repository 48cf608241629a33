"""The file source on real files: complete lines only, new files picked up, a truncated file
read again, stable ownership; FileTailSpout at least once (positions written only up to the
contiguous acked line, replays with backoff, a restart resumes there) and effectively once
(init_state / pre_save round trip); the Streamlet FileTailGenerator and heronpy's
TextFileGenerator. The component host is a small harness recording emits and log lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from heron_py.api.state.state import HashMapState
from heron_py.connectors.base import ConnectorConfigError, ReplayableSource
from heron_py.connectors.common import stable_owner
from heron_py.connectors.files import FileTailGenerator, FileTailSpout, FolderReader, LinePositions, file_spout_config
from heron_py.connectors.files.reader import FINGERPRINT_BYTES, fingerprint
from tests.fakes import ManualClock


class Context:
    def __init__(self, task: int = 1, tasks: list[int] | None = None) -> None:
        self.task, self.tasks = task, tasks or [task]
        self.metrics: dict[str, Any] = {}

    def get_component_id(self) -> str:
        return "files"

    def get_task_id(self) -> int:
        return self.task

    def get_topology_name(self) -> str:
        return "t"

    def get_component_tasks(self, comp: str) -> list[int]:
        return self.tasks

    def register_metric(self, name: str, metric: Any, interval: int) -> None:
        self.metrics[name] = metric


class Delegate:
    def __init__(self) -> None:
        self.emitted: list[tuple[list[Any], Any]] = []
        self.lines: list[tuple[str, Any]] = []

    def emit(self, tup: Any, stream: Any, anchors: Any, direct_task: Any, need: Any, tup_id: Any) -> None:
        self.emitted.append((list(tup), tup_id))

    def log(self, message: str, level: Any = None) -> None:
        self.lines.append((message, level))


def folder_with_lines(tmp_path: Path, n: int) -> Path:
    """A folder "in" holding a.txt of ``n`` lines "line 0", "line 1", ..."""
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.txt").write_text("".join(f"line {i}\n" for i in range(n)))
    return data


def spout(folder, mode: str, clock: ManualClock, state: HashMapState | None = None, **conf: Any):
    d = Delegate()
    s = FileTailSpout(d)
    s.clock = clock
    if state is not None:
        s.init_state(state)
    s.initialize({"topology.reliability.mode": mode, "files.dir": str(folder), "files.poll.ms": 1, **conf}, Context())
    return s, d


def pump(s, clock: ManualClock, n: int = 3) -> None:
    for _ in range(n):
        clock.t += 0.01
        s.next_tuple()


def test_config_errors_verbatim():
    with pytest.raises(ConnectorConfigError) as e:
        file_spout_config({}, "file spout 'f'")
    assert str(e.value) == "file spout 'f': config files.dir: expected the folder to read, found None"
    with pytest.raises(ConnectorConfigError) as e:
        file_spout_config({"files.dir": "/x", "files.encoding": "klingon"}, "file spout 'f'")
    assert str(e.value) == "file spout 'f': config files.encoding: expected a Python codec name, found 'klingon'"


def test_reader_reads_complete_lines_picks_up_new_files_and_rereads_a_truncated_one(tmp_path):
    logs: list[str] = []
    r = FolderReader(str(tmp_path), "*.log", 0, 1, "utf-8", lambda m, _l: logs.append(m), "w")
    (tmp_path / "a.log").write_bytes(b"one\r\ntwo\nthr")
    (tmp_path / "skip.txt").write_text("x\n")
    assert r.scan() == ["a.log"]
    got = r.read(10)
    assert [(ln.number, ln.start, ln.end, ln.text) for ln in got] == [(0, 0, 5, "one"), (1, 5, 9, "two")]
    assert r.read(10) == []  # "thr" has no newline yet
    with open(tmp_path / "a.log", "ab") as f:
        f.write(b"ee\n")
    assert [ln.text for ln in r.read(10)] == ["three"]
    (tmp_path / "b.log").write_text("b0\n")
    assert r.scan() == ["b.log"]
    assert [ln.text for ln in r.read(10)] == ["b0"]
    (tmp_path / "a.log").write_text("new\n")
    assert [(ln.file, ln.number, ln.text) for ln in r.read(10)] == [("a.log", 0, "new")]
    assert logs == ["w: file a.log shrank to 4 bytes, below the position 15 (truncated or replaced); reading it "
                    "again from its start"]


def test_ownership_is_stable_and_covers_every_file():
    names = [f"f{i}.txt" for i in range(50)]
    owners = {n: stable_owner(n, 3) for n in names}
    assert set(owners.values()) == {0, 1, 2}  # every task gets files
    # the owner is a function of the name alone (crc32): a file never moves when others appear
    # (pinned: a different hash after an upgrade would move files between tasks)
    assert [stable_owner(n, 3) for n in ("f7.txt", "f8.txt", "f9.txt")] == [0, 2, 0]


def test_line_positions_commit_only_the_contiguous_acked_run():
    from heron_py.connectors.files.reader import Line
    lp = LinePositions(ReplayableSource())
    lp.assign("a", (0, 0))
    lines = [Line("a", i, i * 4, i * 4 + 4, "xxx") for i in range(4)]
    keys = [lp.emitted(ln) for ln in lines]
    lp.source.ack(keys[1])
    lp.source.ack(keys[2])
    assert lp.commit() == {}  # line 0 is still in flight
    lp.source.ack(keys[0])
    assert lp.commit() == {"a": (3, 12)}  # up to line 3, byte 12: line 3 is still in flight
    lp.source.ack(keys[3])
    assert lp.commit() == {"a": (4, 16)}


def test_line_positions_emitted_many_matches_emitted_one_by_one():
    from heron_py.connectors.files.reader import Line
    one, many = LinePositions(ReplayableSource()), LinePositions(ReplayableSource())
    for lp in (one, many):
        lp.assign("a", (0, 0))
        lp.assign("b", (5, 50))
    # a run of a's lines, then b's, with a stale line (b's 5 again) and one of an unassigned file
    lines = [Line("a", i, i * 4, i * 4 + 4, "x") for i in range(3)] + \
        [Line("b", 5, 50, 60, "y"), Line("b", 6, 60, 70, "z"), Line("b", 5, 50, 60, "y"), Line("c", 0, 0, 2, "q")]
    assert many.emitted_many(lines) == [one.emitted(ln) for ln in lines] == \
        [("a", 0), ("a", 1), ("a", 2), ("b", 5), ("b", 6), None, None]
    assert many.starts == one.starts
    for lp in (one, many):
        lp.source.ack_many([("a", 0), ("a", 1), ("b", 5)])
    assert many.commit() == one.commit() == {"a": (2, 8), "b": (6, 60)}


def test_at_least_once_a_read_goes_out_in_one_batch_emit_when_the_host_binds_one(tmp_path):
    data = folder_with_lines(tmp_path, 5)
    clock = ManualClock(1000.0)
    s, d = spout(data, "ATLEAST_ONCE", clock)
    calls: list[tuple[list[Any], list[Any]]] = []
    s.heron_emit_tracked_many = lambda rows, keys: calls.append((rows, keys))
    pump(s, clock)
    assert d.emitted == []  # nothing one by one
    assert calls == [([["a.txt", i, f"line {i}"] for i in range(5)], [("a.txt", i) for i in range(5)])]
    s.heron_ack_many([("a.txt", i) for i in range(5)])
    assert s.lines.commit() == {"a.txt": (5, sum(len(f"line {i}\n") for i in range(5)))}


def test_at_least_once_commits_up_to_the_contiguous_acked_line_and_resumes_there(tmp_path):
    data = folder_with_lines(tmp_path, 10)
    clock = ManualClock(1000.0)
    s, d = spout(data, "ATLEAST_ONCE", clock)
    pump(s, clock)
    assert [e[0] for e in d.emitted] == [["a.txt", i, f"line {i}"] for i in range(10)]
    ids = [e[1] for e in d.emitted]
    for i in (0, 1, 2, 4, 5):
        s.ack(ids[i])
    s.fail(ids[3])
    clock.t += 0.05
    s.next_tuple()
    assert len(d.emitted) == 10  # the fail waits its 100 ms backoff
    clock.t += 1.0
    s.next_tuple()  # commit period passed; line 3 replayed
    assert d.emitted[10][0] == ["a.txt", 3, "line 3"]
    pos = json.loads((data / ".heron-py-positions" / "t-files" / "a.txt.pos").read_text())
    assert {k: pos[k] for k in ("line", "byte")} == {"line": 3, "byte": 21}  # 0-2 acked; 3 in flight again
    assert pos["ino"] == (data / "a.txt").stat().st_ino
    # the task dies here (no close): a new one resumes at line 3 and reads 3..9 again
    s2, d2 = spout(data, "ATLEAST_ONCE", clock)
    pump(s2, clock)
    assert [e[0][1] for e in d2.emitted] == list(range(3, 10))
    for e in d2.emitted:
        s2.ack(e[1])
    s2.close()
    assert json.loads((data / ".heron-py-positions" / "t-files" / "a.txt.pos").read_text()) == {
        "line": 10, "byte": 70, "ino": (data / "a.txt").stat().st_ino,
        "tail": fingerprint((data / "a.txt").read_bytes()[70 - FINGERPRINT_BYTES:70])}
    m = s2.metrics_snapshot()
    assert m["acked"] == 7 and m["pending"] == 0 and m["lag-bytes"] == 0


def test_files_max_pending_bounds_the_lines_in_flight_and_an_ack_frees_room_before_any_commit(tmp_path):
    data = folder_with_lines(tmp_path, 12)
    clock = ManualClock(1000.0)
    s, d = spout(data, "ATLEAST_ONCE", clock, **{"files.max.pending": 4, "files.batch.lines": 1})
    pump(s, clock, 10)
    assert [e[0][1] for e in d.emitted] == [0, 1, 2, 3]  # 4 in flight: no more
    s.ack(d.emitted[2][1])  # out of order: the commit point (line 0) cannot move
    pump(s, clock, 10)
    assert [e[0][1] for e in d.emitted] == [0, 1, 2, 3, 4]  # the ack's room, within the commit period
    for e in list(d.emitted):
        s.ack(e[1])
    pump(s, clock, 10)
    assert [e[0][1] for e in d.emitted] == list(range(9))
    assert s.metrics_snapshot()["pending"] == 4


def test_a_read_is_one_tree_its_ack_commits_its_lines_and_its_fail_replays_each(tmp_path):
    """With the host's run emit bound (no hook or tap), a read's lines go under one int id; its
    ack acks each line (the positions pass them), its fail fails each line, retried on its own
    with its (file, line) id; ``files.ack.per.line`` keeps a tree per line."""
    data = folder_with_lines(tmp_path, 6)
    clock = ManualClock(1000.0)
    s, d = spout(data, "ATLEAST_ONCE", clock, **{"files.batch.lines": 3, "files.commit.period.ms": 1})
    runs: list[tuple[list[Any], Any]] = []
    s.heron_emit_tracked_run = lambda rows, run: runs.append((rows, run))
    s.next_tuple()
    clock.t += 0.01
    s.next_tuple()
    assert [[r[1] for r in rows] for rows, _ in runs] == [[0, 1, 2], [3, 4, 5]] and d.emitted == []
    (_, run1), (_, run2) = runs
    s.heron_ack_many([run1])
    s.fail(run2)
    pump(s, clock, 3)
    assert s.lines.source.trackers["a.txt"].committed == 3  # lines 0-2 acked and written
    clock.t += 1.0  # the retries' backoff (100 ms, then more)
    pump(s, clock, 3)
    assert sorted(e[0][1] for e in d.emitted) == [3, 4, 5]  # each line replayed on its own, with its id
    for e in d.emitted:
        s.ack(e[1])
    pump(s, clock, 3)
    assert s.lines.source.trackers["a.txt"].committed == 6 and len(s.runs) == 0
    s.ack(run1)  # a late outcome changes nothing
    s2, d2 = spout(data, "ATLEAST_ONCE", ManualClock(1000.0),
                   **{"files.ack.per.line": True, "files.positions.dir": str(tmp_path / "p2")})
    s2.heron_emit_tracked_run = lambda rows, run: runs.append((rows, run))
    s2.next_tuple()
    assert len(runs) == 2 and [e[0][1] for e in d2.emitted] == list(range(6))


def test_effectively_once_positions_go_through_the_checkpoint(tmp_path):
    (tmp_path / "a.txt").write_text("a0\na1\na2\n")
    clock = ManualClock(1000.0)
    state = HashMapState()
    s, d = spout(tmp_path, "EFFECTIVELY_ONCE", clock, state, **{"files.batch.lines": 2})
    s.next_tuple()  # the scan and the first 2 lines
    assert [e for e in d.emitted] == [(["a.txt", 0, "a0"], None), (["a.txt", 1, "a1"], None)]
    s.pre_save(1)
    assert state.get("positions") == {"a.txt": (2, 6)}
    pump(s, clock)
    saved = HashMapState()
    saved.put("positions", dict(state.get("positions")))  # the checkpoint's copy (before a2)
    s2, d2 = spout(tmp_path, "EFFECTIVELY_ONCE", clock, saved)  # the restore after a failure
    pump(s2, clock)
    assert [e[0] for e in d2.emitted] == [["a.txt", 2, "a2"]]
    assert not (tmp_path / ".heron-py-positions").exists()  # nothing but the checkpoint keeps positions


class OneTask:
    """The topology context of a generator's only task (task 5 of "src")."""

    def get_task_id(self):
        return 5

    def get_component_id(self):
        return "src"

    def get_component_tasks(self, c):
        return [5]


def test_file_tail_generator_keeps_positions_in_the_state(tmp_path):
    from heron_py.api.streamlet.components import ContextImpl

    (tmp_path / "a.txt").write_text("x\ny\n")
    state = HashMapState()
    g = FileTailGenerator(str(tmp_path))
    g.setup(ContextImpl(OneTask(), state, None))
    assert [g.get(), g.get(), g.get()] == ["x", "y", None]
    assert state.get("positions") == {"a.txt": (2, 4)}
    (tmp_path / "a.txt").write_text("x\ny\nz\n")
    g2 = FileTailGenerator(str(tmp_path), with_position=True)
    g2.setup(ContextImpl(OneTask(), state, None))  # a restore with that state
    assert g2.get() == ("a.txt", 2, "z")


def test_text_file_generator_still_works(tmp_path):
    from heron_py.api.connectors.textfiles.textfilesgenerator import TextFileGenerator
    from heron_py.api.streamlet.components import ContextImpl

    (tmp_path / "a.txt").write_text("x\ny\n")
    g = TextFileGenerator(str(tmp_path / "*.txt"))
    g.setup(ContextImpl(OneTask(), None, None))
    assert [g.get(), g.get(), g.get()] == ["x\n", "y\n", None]


def test_reader_reads_a_replaced_file_from_its_start_after_the_old_one_ends(tmp_path):
    logs: list[str] = []
    resets: list[str] = []
    r = FolderReader(str(tmp_path), "*.log", 0, 1, "utf-8", lambda m, _l: logs.append(m), "w",
                     on_reset=resets.append)
    (tmp_path / "a.log").write_text("old0\nold1\n")
    r.scan()
    assert [ln.text for ln in r.read(1)] == ["old0"]
    # rotated: the old file renamed away with a line still unread, a new, longer file under the name
    (tmp_path / "a.log").rename(tmp_path / "a.log.1")
    (tmp_path / "a.log").write_text("new0\nnew1\nnew2\n")
    assert [(ln.number, ln.text) for ln in r.read(10)] == [(1, "old1")]  # the old one's end first
    assert [(ln.number, ln.start, ln.text) for ln in r.read(10)] == [(0, 0, "new0"), (1, 5, "new1"), (2, 10, "new2")]
    assert logs == ["w: file a.log was replaced by a new file (another inode under its name); reading it again "
                    "from its start"]
    assert resets == ["a.log"]
    assert r.read(10) == [] and len(logs) == 1


def test_at_least_once_a_truncated_file_counts_its_lines_again_and_old_acks_are_ignored(tmp_path):
    data = folder_with_lines(tmp_path, 5)
    clock = ManualClock(1000.0)
    s, d = spout(data, "ATLEAST_ONCE", clock)
    pump(s, clock)
    old = [e[1] for e in d.emitted]
    s.ack(old[0])
    (data / "a.txt").write_text("fresh 0\nfresh 1\n")  # truncated and rewritten, shorter
    pump(s, clock)
    assert [e[0] for e in d.emitted[5:]] == [["a.txt", 0, "fresh 0"], ["a.txt", 1, "fresh 1"]]
    assert ("file spout 'files' task 1: file a.txt shrank to 16 bytes, below the position 35 (truncated or "
            "replaced); reading it again from its start", "warn") in d.lines
    for key in old[1:]:
        s.ack(key)  # acks of the old content's lines, late: ignored
    for e in d.emitted[5:]:
        s.ack(e[1])
    s.close()
    pos = json.loads((data / ".heron-py-positions" / "t-files" / "a.txt.pos").read_text())
    assert (pos["line"], pos["byte"]) == (2, 16)


def read_five_lines_and_stop(tmp_path):
    """A folder with a.txt of 5 lines, read and acked by a task that then closed: its position
    (5, 35) saved. Returns (the folder, the clock)."""
    data = folder_with_lines(tmp_path, 5)
    clock = ManualClock(1000.0)
    s, d = spout(data, "ATLEAST_ONCE", clock)
    pump(s, clock)
    for e in d.emitted:
        s.ack(e[1])
    s.close()
    return data, clock


def test_a_saved_position_of_another_file_under_the_name_is_not_used(tmp_path):
    data, clock = read_five_lines_and_stop(tmp_path)
    # replaced while no task ran: longer than the saved position, so only the inode tells (the old
    # file is kept under another name, so its inode cannot be handed to the new one)
    (data / "a.txt").rename(data / "kept.txt")
    (data / "a.txt").write_text("".join(f"other {i}\n" for i in range(9)))
    s2, d2 = spout(data, "ATLEAST_ONCE", clock, **{"files.pattern": "a.txt"})
    pump(s2, clock)
    assert [e[0][1] for e in d2.emitted] == list(range(9))
    assert ("file spout 'files' task 1: file a.txt is not the file its saved position (5, 35) was read from "
            "(another inode); reading it from its start", "warn") in d2.lines


def test_a_file_rewritten_in_place_while_no_task_ran_is_read_from_its_start(tmp_path):
    # the same inode (as when a deleted file's inode is reused by its replacement): only the bytes
    # before the saved position tell that it holds other lines now
    data, clock = read_five_lines_and_stop(tmp_path)
    ino = (data / "a.txt").stat().st_ino
    with open(data / "a.txt", "r+") as f:
        f.write("".join(f"LINE {i}\n" for i in range(9)))
    assert (data / "a.txt").stat().st_ino == ino
    s2, d2 = spout(data, "ATLEAST_ONCE", clock)
    pump(s2, clock)
    assert [e[0][2] for e in d2.emitted] == [f"LINE {i}" for i in range(9)]
    assert ("file spout 'files' task 1: file a.txt is not the file its saved position (5, 35) was read from "
            "(other bytes before it); reading it from its start", "warn") in d2.lines


def test_a_file_appended_to_while_no_task_ran_goes_on_from_its_saved_position(tmp_path):
    data, clock = read_five_lines_and_stop(tmp_path)
    with open(data / "a.txt", "a") as f:
        f.write("line 5\nline 6\n")
    s2, d2 = spout(data, "ATLEAST_ONCE", clock)
    pump(s2, clock)
    assert [e[0][1:] for e in d2.emitted] == [[5, "line 5"], [6, "line 6"]]
    assert not [ln for ln in d2.lines if "saved position" in ln[0]]


@pytest.mark.parametrize("content, why", [
    ('{"line": "x", "byte": 0}', "invalid literal for int() with base 10: 'x'"),
    ('{"line": 1, "byte": 7, "ino": "abc"}', "invalid literal for int() with base 10: 'abc'"),
    ('{"line": 1, "byte": 7, "tail": 5}', "tail is int, not a string"),
    ('[1, 7]', "list indices must be integers or slices, not str"),
    ('{"line": 1', "Expecting ',' delimiter: line 1 column 11 (char 10)"),
])
def test_an_unreadable_positions_file_is_one_error_and_the_file_is_read_from_its_start(tmp_path, content, why):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.txt").write_text("line 0\nline 1\n")
    pos_dir = data / ".heron-py-positions" / "t-files"
    pos_dir.mkdir(parents=True)
    (pos_dir / "a.txt.pos").write_text(content)
    clock = ManualClock(1000.0)
    s, d = spout(data, "ATLEAST_ONCE", clock)
    pump(s, clock)
    assert [e[0][1] for e in d.emitted] == [0, 1]
    assert [ln for ln in d.lines if ln[1] == "error"] == [
        (f"file spout 'files' task 1: positions file {pos_dir / 'a.txt.pos'} is unreadable ({why}); expected "
         '{"line": N, "byte": N, "ino": N, "tail": "hex"}; reading a.txt from its start', "error")]


def _read_as_nobody(folder: str, between: Any) -> tuple[list[str], list[str], list[str]]:
    """A FolderReader in a child process without root's right to read any file (setuid nobody
    when run as root), so a file's permissions really deny the open: (lines read before
    ``between()`` runs in the parent, lines read after it, log lines)."""
    import os

    rd, wr = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no new imports after the setuid (the interpreter's home may be closed to nobody)
        try:
            os.close(rd)
            os.close(go_w)
            if os.getuid() == 0:
                os.setgid(65534)
                os.setuid(65534)
            logs: list[str] = []
            r = FolderReader(folder, "*.log", 0, 1, "utf-8", lambda m, _l: logs.append(m), "w")
            r.scan()
            before = [ln.text for ln in r.read(10)] + [ln.text for ln in r.read(10)]  # logged once, not per read
            r.scan()
            before += [ln.text for ln in r.read(10)]  # tried again at a scan: still denied, not logged again
            os.write(wr, json.dumps(before).encode() + b"\n")
            os.read(go_r, 1)  # the parent changed the file's mode
            r.scan()
            after = [ln.text for ln in r.read(10)]
            os.write(wr, json.dumps([after, logs]).encode() + b"\n")
        finally:
            os._exit(0)
    os.close(wr)
    os.close(go_r)
    with os.fdopen(rd, "rb") as f:
        before = json.loads(f.readline())
        between()
        os.write(go_w, b"x")
        os.close(go_w)
        after, logs = json.loads(f.readline())
    os.waitpid(pid, 0)
    return before, after, logs


def test_an_unreadable_file_is_logged_once_and_the_others_go_on():
    import os
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="heron-files-")  # not under root's private pytest folder
    try:
        os.chmod(folder, 0o755)
        for name, text in (("a.log", "a0\na1\n"), ("b.log", "b0\n")):
            with open(os.path.join(folder, name), "w") as f:
                f.write(text)
            os.chmod(os.path.join(folder, name), 0o644)
        os.chmod(os.path.join(folder, "b.log"), 0)
        before, after, logs = _read_as_nobody(folder, lambda: os.chmod(os.path.join(folder, "b.log"), 0o644))
        assert before == ["a0", "a1"]
        assert after == ["b0"]  # readable again at the next scan, from where it was
        assert logs == [f"w: file b.log in {folder} is unreadable (PermissionError: Permission denied); expected a "
                        f"file this process may read; skipping it and trying again every poll",
                        "w: file b.log is readable again; reading it from line 0"]
    finally:
        shutil.rmtree(folder)


def test_a_missing_folder_is_one_line_and_read_once_it_exists(tmp_path):
    data = tmp_path / "later"
    clock = ManualClock(1000.0)
    s, d = spout(data, "ATLEAST_ONCE", clock)
    pump(s, clock, 5)
    line = f"file spout 'files' task 1: folder {data} does not exist; waiting for it"
    assert d.lines == [(line, "warn")]  # once, not per poll
    assert d.emitted == []
    data.mkdir()
    (data / "a.txt").write_text("x\n")
    pump(s, clock)
    assert [e[0] for e in d.emitted] == [["a.txt", 0, "x"]]
    assert d.lines == [(line, "warn")]
