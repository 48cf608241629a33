"""The multilang inbox is bounded (issue 34, low): a subprocess that writes faster than its
task takes its commands waits on its stdout pipe; nothing is lost, and memory stays bounded."""

from __future__ import annotations

import logging
import sys
import time

from heron_py.multilang import process as mp
from heron_py.multilang.process import Closed, ShellProcess
from tests.support import wait_for

N = 3000


def test_a_fast_writer_blocks_at_the_bound_and_loses_nothing(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(mp, "INBOX_MAX", 100)
    script = (f"import sys\nfor i in range({N}):\n"
              "    sys.stdout.write('{\"command\": \"emit\", \"tuple\": [' + str(i) + ']}\\nend\\n')\n"
              "sys.stdout.flush()\n")
    p = ShellProcess([sys.executable, "-c", script], tmp_path, "json", 1 << 20, logging.getLogger("t"), "test")
    wakes: list[int] = []
    p.on_input = lambda: wakes.append(1)
    # the subprocess's start is not timed (a loaded CI machine took more than a second)
    wait_for(lambda: p.inbox.qsize() >= 100, 60, "the inbox to fill")
    time.sleep(0.5)
    assert p.inbox.qsize() == 100  # full, and the writer waits
    got = []
    while True:
        v = p.inbox.get(timeout=10)
        if isinstance(v, Closed):
            break
        got.append(v["tuple"][0])
    assert got == list(range(N))
    assert wakes  # the task's thread was woken before the reader waited for room
    p.proc.wait(timeout=10)
