"""FileTailSpout at least once on real processes, 2 containers: FileTailSpout → split → sink, the
sink appending each word with its (file, line, position) to a file of its own and acking only
after the write. One topology for the module:

- files grow while it runs; kill -9 of a spout task, then of a sink task, mid-run: every line's
  words are in the output at least once, and exactly once after de-duplication by (file, line
  number, position) (the line number stands for the byte offset: in an append-only file one
  maps to the other); replays did write some words twice;
- a file truncated in place and a file replaced by a new one (renamed over it) mid-run: one log
  line each, asserted verbatim, the new content read from its start, the topology going on;
- an unreadable file (permissions): one log line, the other files going on (skipped as root:
  permissions do not deny root; tests/unit/connectors/files/test_file_source.py covers it in a setuid child)."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from heron_py.connectors.common import stable_owner
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from heron_py.testing.local import complete_lines, kill_local
from tests.connector_support import task_logs as _logs
from tests.connector_support import task_pid as _pid
from tests.support import wait_for

pytestmark = pytest.mark.integration

N = 6000  # lines of 3 words over 4 files
NAME = "file_alo"

# the topology file, written by the fixture
TOPOLOGY = '''
import argparse
import os
import sys
import time

from heron_py.connectors.files import FileTailSpout
from heronpy.api.bolt.bolt import Bolt
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class Split(Bolt):
    outputs = ["word", "file", "lineno", "pos"]

    def initialize(self, config, context):
        self.delay_s = float(config.get("t.split.delay.ms", 0)) / 1000.0

    def process(self, tup):
        file, lineno, line = tup.values
        if self.delay_s:
            time.sleep(self.delay_s)  # a slow stage: lines queue, so each kill catches some in flight
        for pos, word in enumerate(line.split()):
            self.emit([word, file, lineno, pos], anchors=[tup])
        self.ack(tup)


class Sink(Bolt):
    """Appends "file TAB line TAB pos TAB word" and acks what it wrote at its next tick (a kill
    -9 keeps what the OS has: a written line survives, an unacked one is replayed). Acking a tick
    late means a kill while words flow always leaves written words unacked, so their replays
    write them twice: the test's de-duplication has copies to remove, by construction."""

    outputs = []

    def initialize(self, config, context):
        out = config["t.out"]
        os.makedirs(out, exist_ok=True)
        # one file per process: a killed task's half-written last line stays apart
        self.out = open(os.path.join(out, f"sink-{context.get_task_id()}-{os.getpid()}.txt"), "a")
        self.written = []

    def process(self, tup):
        word, file, lineno, pos = tup.values
        self.out.write(f"{file}\\t{lineno}\\t{pos}\\t{word}\\n")
        self.out.flush()
        self.written.append(tup)

    def process_tick(self, tup):
        for t in self.written:
            self.ack(t)
        self.written = []


ap = argparse.ArgumentParser()
ap.add_argument("--dir", required=True)
ap.add_argument("--out", required=True)
args = ap.parse_args(sys.argv[1:])
b = TopologyBuilder("file_alo")
spout = b.add_spout("files", FileTailSpout, par=2, config={
    "files.dir": args.dir, "files.pattern": "*.log", "files.poll.ms": 200, "files.commit.period.ms": 300})
split = b.add_bolt("split", Split, par=2, inputs={spout: Grouping.SHUFFLE}, config={"t.split.delay.ms": 2})
b.add_bolt("sink", Sink, par=2, inputs={split: Grouping.fields("word")},
           config={"t.out": args.out, "topology.tick.tuple.freq.secs": 0.3})
b.set_config({"topology.stmgrs": 2, "topology.reliability.mode": "ATLEAST_ONCE",
              "topology.message.timeout.secs": 4, "topology.max.spout.pending": 500})
b.build_and_submit()
'''


@dataclass
class Run:
    home: Path
    folder: Path
    out: Path


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    base = tmp_path_factory.mktemp("file-alo")
    home, folder, out = base / "home", base / "in", base / "out"
    for d in (home, folder, out):
        d.mkdir()
    (base / "topology.py").write_text(TOPOLOGY)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HERON_PY_HOME", str(home))
        run_local(base / "topology.py", ["--dir", str(folder), "--out", str(out)], home=home, name=NAME,
                  keep_running=True)
        try:
            yield Run(home, folder, out)
        finally:
            kill_local(home, NAME)


def _rows(out: Path) -> list[tuple[str, int, int, str]]:
    """Every (file, line, pos, word) the sinks wrote, duplicates included."""
    rows = []
    for f in out.glob("sink-*.txt"):
        for row in complete_lines(f):
            file, lineno, pos, word = row.split("\t")
            rows.append((file, int(lineno), int(pos), word))
    return rows


def _output(out: Path) -> tuple[dict[tuple[str, int, int], str], int]:
    """(file, line, pos) → word, de-duplicated; and how many rows were written (with duplicates)."""
    rows = _rows(out)
    return {(f, n, p): w for f, n, p, w in rows}, len(rows)


def _words(out: Path) -> set[str]:
    return {r[3] for r in _rows(out)}


class Writer(threading.Thread):
    """Appends N lines to f0..f3.log, the first two thirds over ~``seconds``, then waits for
    ``resume`` before the rest: however slow the machine, the files are still growing when the
    test kills tasks. ``expected`` maps (file, line) to words."""

    def __init__(self, folder: Path, seconds: float) -> None:
        super().__init__(daemon=True)
        self.folder, self.seconds = folder, seconds
        self.expected: dict[tuple[str, int], list[str]] = {}
        self.resume = threading.Event()

    def run(self) -> None:
        handles = {f: open(self.folder / f"f{f}.log", "a") for f in range(4)}  # noqa: SIM115 (closed below)
        numbers = dict.fromkeys(range(4), 0)
        for i in range(N):
            if i == 2 * N // 3:  # a flush boundary (N is a multiple of 300): every line so far is in the files
                self.resume.wait(120)
            f = i % 4
            words = [f"w{i % 97}", f"x{i % 13}", f"y{i}"]
            handles[f].write(" ".join(words) + "\n")
            self.expected[(f"f{f}.log", numbers[f])] = words
            numbers[f] += 1
            if i % 100 == 99:
                for h in handles.values():
                    h.flush()
                time.sleep(self.seconds / (N / 100))
        for h in handles.values():
            h.close()


def _spout_where(home: Path, file: str) -> str:
    """The log prefix of the spout task that owns ``file`` (crc32 of its name over the tasks)."""
    plan = LocalFsStateManager(home).get_packing_plan(NAME)
    assert plan is not None, f"no packing plan of topology {NAME}"
    tasks = sorted(t.task_id for t in plan.tasks if t.component == "files")
    return f"file spout 'files' task {tasks[stable_owner(file, len(tasks))]}"


def _spout_log(home: Path) -> str:
    return _logs(home, NAME, "container-*/files-*.log")


def test_kill_9_of_the_spout_and_of_the_sink_loses_nothing(topo: Run) -> None:
    writer = Writer(topo.folder, seconds=4)
    writer.start()
    try:
        wait_for(lambda: _output(topo.out)[1] > 3000, 40, "1000 lines written")
        os.kill(_pid(topo.home, NAME, "files"), signal.SIGKILL)
        wait_for(lambda: _output(topo.out)[1] > 8000, 40, "2700 lines written")
        os.kill(_pid(topo.home, NAME, "sink"), signal.SIGKILL)
        writer.resume.set()  # the last third of the lines is written only now, after both kills
        writer.join(30)
        want = {(f, n, pos): w for (f, n), words in writer.expected.items() for pos, w in enumerate(words)}
        wait_for(lambda: want.keys() <= _output(topo.out)[0].keys(), 60, f"all {len(want)} words written")
        seen, total = _output(topo.out)
        assert {k: seen[k] for k in want} == want  # at least once, and the right word at each place
        assert seen.keys() == want.keys()  # nothing that was not written to a file
        assert total > len(want)  # replays wrote some words twice; de-duplication made it exact
        executor_log = _logs(topo.home, NAME, "executor-*.log")
        assert re.search(r"files-\d+ exited with code -9", executor_log)
        assert re.search(r"sink-\d+ exited with code -9", executor_log)
    finally:
        writer.resume.set()


def _write_lines(path: Path, prefix: str, n: int) -> list[str]:
    words = [f"{prefix}{i}" for i in range(n)]
    path.write_text("".join(w + "\n" for w in words))
    return words


def test_a_truncated_and_a_replaced_file_are_read_again_from_their_start(topo: Run) -> None:
    old_t = _write_lines(topo.folder / "t.log", "told", 40)
    old_r = _write_lines(topo.folder / "r.log", "rold", 40)
    wait_for(lambda: set(old_t + old_r) <= _words(topo.out), 30, "the first contents of t.log and r.log")
    size_t = (topo.folder / "t.log").stat().st_size
    size_r = (topo.folder / "r.log").stat().st_size
    # truncated in place, shorter: the new bytes go over the old ones first, then the cut, so the
    # reader sees one shrink (to the new size), never an empty file
    new_t = [f"tnew{i}" for i in range(5)]
    data = "".join(w + "\n" for w in new_t).encode()
    with open(topo.folder / "t.log", "r+b") as f:
        f.write(data)
        f.truncate(len(data))
    # replaced: a new file renamed over the name (a log rotation), longer than the old one
    new_r = _write_lines(topo.folder / "r.tmp", "rnew", 60)
    os.replace(topo.folder / "r.tmp", topo.folder / "r.log")
    later = _write_lines(topo.folder / "later.log", "later", 10)  # the topology goes on
    wait_for(lambda: set(new_t + new_r + later) <= _words(topo.out), 30, "the new contents and a later file")
    # line numbers count again from 0 (the same (file, line) keys as the old content's: a reader
    # de-duplicating across a truncation needs the inode too)
    placed = {w: (f, n) for f, n, _p, w in _rows(topo.out)}
    assert [placed[w] for w in new_t] == [("t.log", n) for n in range(5)]
    assert [placed[w] for w in new_r] == [("r.log", n) for n in range(60)]
    log = _spout_log(topo.home)
    line_t = (f"{_spout_where(topo.home, 't.log')}: file t.log shrank to {len(data)} bytes, below the position "
              f"{size_t} (truncated or replaced); reading it again from its start")
    line_r = (f"{_spout_where(topo.home, 'r.log')}: file r.log was replaced by a new file (another inode under "
              f"its name); reading it again from its start")
    assert log.count(line_t) == 1, line_t
    assert log.count(line_r) == 1, line_r
    assert size_r < (topo.folder / "r.log").stat().st_size  # only the inode could tell


@pytest.mark.skipif(os.geteuid() == 0, reason="running as root: file permissions do not deny root (the unit test "
                    "test_an_unreadable_file_is_logged_once_and_the_others_go_on covers it in a setuid child)")
def test_an_unreadable_file_is_logged_once_and_the_topology_goes_on(topo: Run) -> None:
    u = topo.folder / "u.log"
    _write_lines(u, "unread", 3)
    u.chmod(0)
    after = _write_lines(topo.folder / "after-u.log", "afteru", 10)
    wait_for(lambda: set(after) <= _words(topo.out), 30, "a file written after the unreadable one")
    line = (f"{_spout_where(topo.home, 'u.log')}: file u.log in {topo.folder} is unreadable (PermissionError: "
            f"Permission denied); expected a file this process may read; skipping it and trying again every poll")
    time.sleep(1.0)  # several polls: still one line
    assert _spout_log(topo.home).count(line) == 1, line
    u.chmod(0o644)
    wait_for(lambda: {"unread0", "unread1", "unread2"} <= _words(topo.out), 30, "u.log once readable")
