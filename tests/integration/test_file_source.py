"""FileTailSpout effectively once on real processes, 2 containers: files grow while the topology
runs and new files appear mid-run; kill -9 of a spout task, then of a count task, mid-run. The
result is read where it lives, the last completed checkpoint: once its spout positions cover
every byte of every file, the count tasks' states in it equal a plain Python count of the
files' words. No de-duplication anywhere: a line counted twice would show."""

from __future__ import annotations

import os
import pickle
import re
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from heron_py.checkpoint.storage import IncompleteCheckpointError, LocalFsStorage
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES
from tests.connector_support import task_logs as _logs
from tests.connector_support import task_pid as _pid
from tests.support import wait_for

pytestmark = pytest.mark.integration

TOPOLOGY = EXAMPLES / "files" / "file_word_count.py"
LINES = 24_000  # over 6 files, 4 at the start and 2 appearing mid-run


class Writer(threading.Thread):
    """Writes the first two thirds of the lines over ``seconds``, then waits for ``resume`` before
    the rest: however slow the machine, the files are still growing when the test kills tasks."""

    def __init__(self, folder: Path, seconds: float) -> None:
        super().__init__(daemon=True)
        self.folder, self.seconds = folder, seconds
        self.expected: Counter = Counter()
        self.resume = threading.Event()

    def run(self) -> None:
        handles = {}
        for i in range(LINES):
            if i == 2 * LINES // 3:
                for h in handles.values():
                    h.flush()
                self.resume.wait(120)
            f = i % 6 if i >= LINES // 3 else i % 4  # f4 and f5 appear a third of the way in
            if f not in handles:
                handles[f] = open(self.folder / f"f{f}.log", "a")  # noqa: SIM115 (closed below)
            words = [f"w{i % 97}", f"x{i % 13}", f"y{i % 31}"]
            handles[f].write(" ".join(words) + "\n")
            self.expected.update(words)
            if i % 200 == 199:
                for h in handles.values():
                    h.flush()
                time.sleep(self.seconds / (LINES / 200))
        for h in handles.values():
            h.close()


def _tasks(home: Path, name: str) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t in LocalFsStateManager(home).get_packing_plan(name).tasks:
        out.setdefault(t.component, []).append(t.task_id)
    return out


def _sizes(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in folder.glob("f*.log")}


def _final(home: Path, name: str, folder: Path, writer: Writer) -> tuple[int, Counter] | None:
    """The newest completed checkpoint whose spout positions cover every file to its end."""
    if writer.is_alive():
        return None
    storage = LocalFsStorage(home / "checkpoints")
    tasks = _tasks(home, name)
    sizes = _sizes(folder)
    for cid in reversed(storage.completed_ids(name)):
        try:
            covered: dict[str, int] = {}
            for t in tasks["files"]:
                for f, (_line, byte) in (pickle.loads(storage.load(name, cid, t) or pickle.dumps({}))
                                         .get("positions") or {}).items():
                    covered[f] = byte
            if covered != sizes:
                continue
            counts: Counter = Counter()
            for t in tasks["count"]:
                counts.update(pickle.loads(storage.load(name, cid, t) or pickle.dumps({})))
        except IncompleteCheckpointError:
            continue
        return cid, counts
    return None


def _checkpoints(home: Path, name: str) -> int:
    return len(re.findall(r"checkpoint \d+ complete", _logs(home, name, "container-0/tmanager*.log")))


def test_effectively_once_count_is_exact_through_kill_9(heron_home, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    writer = Writer(folder, seconds=10)
    writer.start()
    run = run_local(TOPOLOGY, ["--dir", str(folder), "--pattern", "f*.log"], home=heron_home, name="fwc",
                    keep_running=True)
    try:
        wait_for(lambda: _checkpoints(heron_home, run.name) >= 2, 40, "two checkpoints")
        os.kill(_pid(heron_home, run.name, "files"), signal.SIGKILL)
        done = _checkpoints(heron_home, run.name)
        wait_for(lambda: _checkpoints(heron_home, run.name) >= done + 2, 40, "two checkpoints after the spout kill")
        os.kill(_pid(heron_home, run.name, "count"), signal.SIGKILL)
        writer.resume.set()  # the last third of the lines is written only now, after both kills
        _cid, counts = wait_for(lambda: _final(heron_home, run.name, folder, writer), 50,
                               "a completed checkpoint covering every file")
        assert sum(counts.values()) == 3 * LINES
        assert counts == writer.expected
        assert sorted(_sizes(folder)) == [f"f{i}.log" for i in range(6)]
        executor_log = _logs(heron_home, run.name, "executor-*.log")
        assert re.search(r"files-\d+ exited with code -9", executor_log)
        assert re.search(r"count-\d+ exited with code -9", executor_log)
        assert len(re.findall(r"restore \d+ to checkpoint \d+ \(failure: ",
                              _logs(heron_home, run.name, "container-0/tmanager*.log"))) >= 2
    finally:
        writer.resume.set()
        kill_local(heron_home, run.name)
