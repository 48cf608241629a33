"""Log caps on a running topology: a bolt that logs a lot, under a tiny cap, leaves a bounded
logs folder (its log and one rotated file, far less than it wrote); metrics.jsonl rotates the
same; and the executor swept the stale temporary file a crash had left in the topology's
checkpoints."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.support import wait_for

pytestmark = pytest.mark.integration

# the topology file, written by the test: the bolt prints one fixed-size line per tuple
CHATTY = '''
import time

from heronpy.api.bolt.bolt import Bolt
from heronpy.api.spout.spout import Spout
from heronpy.api.stream import Grouping
from heronpy.api.topology import TopologyBuilder


class Numbers(Spout):
    outputs = ["n"]

    def initialize(self, config, context):
        self.n = 0

    def next_tuple(self):
        time.sleep(0.002)
        self.n += 1
        self.emit([self.n])


class Chatty(Bolt):
    outputs = []

    def initialize(self, config, context):
        self.seen = 0

    def process(self, tup):
        self.seen += 1
        print(f"logged {self.seen:08d} " + "y" * 200, flush=True)


b = TopologyBuilder("chatty")
s = b.add_spout("numbers", Numbers, par=1)
b.add_bolt("chatty", Chatty, par=1, inputs={s: Grouping.SHUFFLE})
b.build_and_submit()
'''
LINE = len(f"logged {0:08d} " + "y" * 200) + 1
CAP_MB = 0.02
CAP = int(CAP_MB * 1024 * 1024)
WRITTEN = 3000 * LINE  # about 650 KB: the run lasts ~6 s of the bolt's logging, three rotation checks


def _last_count(log: Path) -> int:
    """The number of the last whole line the bolt printed in its current log."""
    try:
        lines = [ln for ln in log.read_bytes().split(b"\n")[:-1] if ln.startswith(b"logged ")]
    except FileNotFoundError:
        return 0
    return int(lines[-1].split()[1]) if lines else 0


def _first_count(log: Path) -> int:
    """The number of the first line the bolt printed in ``log`` (the task's own log lines aside)."""
    first = next(ln for ln in log.read_bytes().split(b"\n") if ln.startswith(b"logged "))
    return int(first.split()[1])


def test_a_chatty_topology_keeps_its_logs_bounded(heron_home: Path, tmp_path: Path) -> None:
    topology = tmp_path / "chatty.py"
    topology.write_text(CHATTY)
    paths = TopologyPaths.of("chatty", heron_home)
    # a crash's leftovers in the topology's checkpoints (which outlive a kill and a new submit;
    # the container's folder does not): an old one of ours, a young one (maybe being written by
    # another host sharing the folder) and an old file that is not ours
    ckpt = heron_home / "checkpoints" / "chatty" / "5"
    ckpt.mkdir(parents=True)
    stale, young, other = ckpt / ".tmp-3.k2j4h5g6", ckpt / ".tmp-4.abcdefgh", ckpt / ".tmp-notes"
    for f in (stale, young, other):
        f.write_text("x")
    old = time.time() - 600
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    run = run_local(topology, home=heron_home, keep_running=True, properties={
        "heron.logging.maximum.size.mb": str(CAP_MB), "heron.logging.maximum.files": "1",
        "topology.metrics.export.interval.secs": "0.5"})
    try:
        logs = paths.container_logs(0)
        bolt = logs / "chatty-2.log"
        wait_for(lambda: _last_count(bolt) * LINE >= WRITTEN and (logs / "metrics.jsonl.1").exists(), 40,
                 "the bolt to log 650 KB and metrics.jsonl to rotate")
        files = {p.name: p.stat().st_size for p in logs.iterdir()}
        # right after a rotation the current log may hold no whole line yet
        written = max(_last_count(bolt), _last_count(logs / "chatty-2.log.1")) * LINE
        first_kept = _first_count(logs / "chatty-2.log.1")
    finally:
        kill_local(heron_home, run.name)
    assert "chatty-2.log.1" in files and "chatty-2.log.2" not in files, sorted(files)
    kept = files["chatty-2.log"] + files["chatty-2.log.1"]
    print(f"kept {kept} of {written} bytes written; the rotated file starts at line {first_kept}")
    # older lines were dropped, not kept in more files: the rotated file starts past what the
    # first rotation took (at least the cap's worth of lines); a check every 2 s lets a file grow
    # past the cap by what the bolt writes meanwhile, so the bound is that, not the cap
    assert first_kept > CAP // LINE, first_kept
    assert kept < written, (kept, written)
    assert not [n for n in files if n.endswith(".2")], sorted(files)  # one old file kept, no more
    assert "metrics.jsonl.1" in files and files["metrics.jsonl.1"] > CAP
    assert (stale.exists(), young.exists(), other.exists()) == (False, True, True)
