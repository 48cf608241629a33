"""The file source on real files: complete lines only, new files picked up, a truncated file
read again, stable ownership; FileTailSpout at least once (positions written only up to the
contiguous acked line, replays with backoff, a restart resumes there) and effectively once
(init_state / pre_save round trip); the Streamlet FileTailGenerator and heronpy's
TextFileGenerator. The component host is a small harness recording emits and log lines."""

from __future__ import annotations

import json
from typing import Any

import pytest

from heron_py.api.state.state import HashMapState
from heron_py.connectors.base import ConnectorConfigError, ReplayableSource
from heron_py.connectors.common import stable_owner
from heron_py.connectors.files import FileTailGenerator, FileTailSpout, FolderReader, LinePositions, file_spout_config


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


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


def spout(folder, mode: str, clock: Clock, state: HashMapState | None = None, **conf: Any):
    d = Delegate()
    s = FileTailSpout(d)
    s.clock = clock
    if state is not None:
        s.init_state(state)
    s.initialize({"topology.reliability.mode": mode, "files.dir": str(folder), "files.poll.ms": 1, **conf}, Context())
    return s, d


def pump(s, clock: Clock, n: int = 3) -> None:
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


def test_at_least_once_commits_up_to_the_contiguous_acked_line_and_resumes_there(tmp_path):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.txt").write_text("".join(f"line {i}\n" for i in range(10)))
    clock = Clock()
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
    assert pos == {"line": 3, "byte": 21}  # lines 0-2 acked; 3 in flight again
    # the task dies here (no close): a new one resumes at line 3 and reads 3..9 again
    s2, d2 = spout(data, "ATLEAST_ONCE", clock)
    pump(s2, clock)
    assert [e[0][1] for e in d2.emitted] == list(range(3, 10))
    for e in d2.emitted:
        s2.ack(e[1])
    s2.close()
    assert json.loads((data / ".heron-py-positions" / "t-files" / "a.txt.pos").read_text()) == {"line": 10,
                                                                                                 "byte": 70}
    m = s2.metrics_snapshot()
    assert m["acked"] == 7 and m["pending"] == 0 and m["lag-bytes"] == 0


def test_effectively_once_positions_go_through_the_checkpoint(tmp_path):
    (tmp_path / "a.txt").write_text("a0\na1\na2\n")
    clock = Clock()
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


def test_file_tail_generator_keeps_positions_in_the_state(tmp_path):
    from heron_py.api.streamlet.components import ContextImpl

    class Top:
        def get_task_id(self):
            return 5

        def get_component_id(self):
            return "src"

        def get_component_tasks(self, c):
            return [5]

    (tmp_path / "a.txt").write_text("x\ny\n")
    state = HashMapState()
    g = FileTailGenerator(str(tmp_path))
    g.setup(ContextImpl(Top(), state, None))
    assert [g.get(), g.get(), g.get()] == ["x", "y", None]
    assert state.get("positions") == {"a.txt": (2, 4)}
    (tmp_path / "a.txt").write_text("x\ny\nz\n")
    g2 = FileTailGenerator(str(tmp_path), with_position=True)
    g2.setup(ContextImpl(Top(), state, None))  # a restore with that state
    assert g2.get() == ("a.txt", 2, "z")


def test_text_file_generator_still_works(tmp_path):
    from heron_py.api.connectors.textfiles.textfilesgenerator import TextFileGenerator
    from heron_py.api.streamlet.components import ContextImpl

    class Top:
        def get_task_id(self):
            return 5

        def get_component_id(self):
            return "src"

        def get_component_tasks(self, c):
            return [5]

    (tmp_path / "a.txt").write_text("x\ny\n")
    g = TextFileGenerator(str(tmp_path / "*.txt"))
    g.setup(ContextImpl(Top(), None, None))
    assert [g.get(), g.get(), g.get()] == ["x\n", "y\n", None]
