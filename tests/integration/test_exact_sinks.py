"""Effectively once to the sink on real processes, 2 containers: growing files → split →
PostgresInsertBolt into a table with no key, and FileSink into part files, with kill -9 of a
PostgreSQL sink task and of a file sink task, the PostgreSQL server restarted, and a stream
manager killed, mid-run. Each word of each line must be in the table once and in the part files
once: no key, no de-duplication, so a replay written twice or a batch dropped would show."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES
from tests.connector_support import task_logs as _logs
from tests.connector_support import task_pid as _pid
from tests.postgres_server import PostgresServer, postgres_or_skip
from tests.support import wait_for

pytestmark = pytest.mark.integration

TOPOLOGY = EXAMPLES / "effectively_once" / "files_to_sinks.py"
LINES = 6000


@pytest.fixture(scope="module")
def pg():
    s = postgres_or_skip()
    yield s
    s.destroy()


class Writer(threading.Thread):
    """Two thirds of the lines over ``seconds``, the rest once ``resume`` is set (after the faults)."""

    def __init__(self, folder: Path, seconds: float) -> None:
        super().__init__(daemon=True)
        self.folder, self.seconds = folder, seconds
        self.expected: Counter = Counter()
        self.resume = threading.Event()

    def run(self) -> None:
        with open(self.folder / "a.log", "a") as fa, open(self.folder / "b.log", "a") as fb:
            for i in range(LINES):
                if i == 2 * LINES // 3:
                    fa.flush()
                    fb.flush()
                    self.resume.wait(120)
                f = fa if i % 2 else fb
                words = [f"w{i % 97}", f"x{i}"]
                f.write(" ".join(words) + "\n")
                self.expected.update(words)
                if i % 100 == 99:
                    fa.flush()
                    fb.flush()
                    time.sleep(self.seconds / (LINES / 100))


def _table(pg: PostgresServer) -> Counter:
    try:
        return Counter(w for (w,) in pg.execute("SELECT word FROM words"))
    except Exception:  # the server is restarting
        return Counter()


def _files(out: Path) -> Counter:
    c: Counter = Counter()
    for p in out.glob("part-*"):
        for line in p.read_text().splitlines():
            c[line.split(" ")[3]] += 1
    return c


def _checkpoints(home: Path, name: str) -> int:
    import re

    return len(re.findall(r"checkpoint \d+ complete", _logs(home, name, "container-0/tmanager*.log")))


def test_postgres_and_files_are_exact_through_kills_and_a_server_restart(heron_home, tmp_path, pg):
    pg.execute("DROP TABLE IF EXISTS words")
    pg.execute("DROP TABLE IF EXISTS heron_py_sink_progress")
    pg.execute("CREATE TABLE words (file text, lineno int, pos int, word text)")
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    writer = Writer(folder, seconds=6)
    writer.start()
    run = run_local(TOPOLOGY, ["--dir", str(folder), "--pattern", "*.log", "--postgres", pg.url, "--table", "words",
                               "--out", str(out)], home=heron_home, name="eosinks", keep_running=True)
    try:
        wait_for(lambda: _checkpoints(heron_home, run.name) >= 2, 60, "two checkpoints")
        os.kill(_pid(heron_home, run.name, "words_db"), signal.SIGKILL)
        done = _checkpoints(heron_home, run.name)
        wait_for(lambda: _checkpoints(heron_home, run.name) >= done + 1, 60, "a checkpoint after the sink kill")
        pg.stop()  # the server restarts while checkpoints complete: their commits wait, never drop
        time.sleep(1.5)
        pg.start()
        os.kill(_pid(heron_home, run.name, "words_out"), signal.SIGKILL)
        done = _checkpoints(heron_home, run.name)
        wait_for(lambda: _checkpoints(heron_home, run.name) >= done + 1, 60, "a checkpoint after the file sink kill")
        state = LocalFsStateManager(heron_home)
        os.kill(int(state.get_execution_state(run.name)["stmgrs"]["1"]["pid"]), signal.SIGKILL)
        done = _checkpoints(heron_home, run.name)
        wait_for(lambda: _checkpoints(heron_home, run.name) >= done + 1, 60, "a checkpoint after the stream manager "
                                                                           "kill")
        writer.resume.set()
        writer.join(60)
        want = writer.expected
        wait_for(lambda: _table(pg) == want and _files(out) == want, 90, "every word in the table and the files")
        time.sleep(3)  # a few more checkpoints: nothing is written again
        assert _table(pg) == want
        assert _files(out) == want
        executor_log = _logs(heron_home, run.name, "executor-*.log")
        assert "words_db-" in executor_log and "exited with code -9" in executor_log
    finally:
        writer.resume.set()
        kill_local(heron_home, run.name)
