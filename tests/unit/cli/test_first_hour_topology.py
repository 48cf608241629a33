"""A new user's first topologies on the local cluster: one whose bolt cannot start ends the
submit at its second identical crash; one that runs shows its counters in ``heron-py metrics``
right after the submit and exports every process's restart counter at 0 from the start."""

from __future__ import annotations

import json
import re
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from heron_py.cli.crashes import start_errors
from heron_py.common.container_layout import TopologyPaths
from tests.support import run_cli

TOPOLOGY = textwrap.dedent('''
    import time

    from heronpy.api.bolt.bolt import Bolt
    from heronpy.api.spout.spout import Spout
    from heronpy.api.topology import TopologyBuilder


    class Numbers(Spout):
        outputs = ["n"]

        def initialize(self, config, context):
            self.n = 0

        def next_tuple(self):
            time.sleep(0.01)
            self.n += 1
            self.emit([self.n])


    class NeedsAFile(Bolt):
        outputs = []

        def initialize(self, config, context):
            with open("/nonexistent/words.txt") as f:
                self.words = f.read().split()

        def process(self, tup):
            pass


    class Sum(Bolt):
        outputs = []

        def initialize(self, config, context):
            self.total = 0

        def process(self, tup):
            self.total += tup.values[0]


    if __name__ == "__main__":
        import sys

        b = TopologyBuilder(sys.argv[1])
        bolt = NeedsAFile if sys.argv[1] == "crashing" else Sum
        b.add_bolt("sum", bolt, par=1, inputs=[b.add_spout("numbers", Numbers, par=1)])
        b.build_and_submit()
''')


@pytest.fixture
def topology_file(tmp_path: Path) -> Path:
    f = tmp_path / "first.py"
    f.write_text(TOPOLOGY)
    return f


def test_start_errors_are_the_deaths_before_initialize() -> None:
    log = """\
2026-01-01 10:00:00,001 INFO instance[sum-2] instance[sum-2]: connected
2026-01-01 10:00:00,002 ERROR instance[sum-2] instance[sum-2]: task 2 (sum) died: Traceback (most recent call last):
  File "x.py", line 3, in initialize
    open("w")
FileNotFoundError: [Errno 2] No such file or directory: 'w'

2026-01-01 10:00:01,000 INFO instance[sum-2] instance[sum-2]: bolt sum task 2 initialized
2026-01-01 10:00:02,000 ERROR instance[sum-2] instance[sum-2]: task 2 (sum) died: Traceback (most recent call last):
  File "x.py", line 9, in process
ZeroDivisionError: division by zero

2026-01-01 10:00:03,002 ERROR instance[sum-2] instance[sum-2]: task 2 (sum) died: Traceback (most recent call last):
  File "x.py", line 3, in initialize
KeyError: 'words'"""
    # the death in process() came after the task initialized: not a start crash
    assert start_errors(log.splitlines()) == ["FileNotFoundError: [Errno 2] No such file or directory: 'w'",
                                              "KeyError: 'words'"]


def test_a_bolt_that_raises_in_initialize_ends_the_submit_at_its_second_identical_crash(
        heron_home: Path, topology_file: Path) -> None:
    t0 = time.monotonic()
    p = run_cli(heron_home, "submit", str(topology_file), "crashing", timeout=120)
    took = time.monotonic() - t0
    log = TopologyPaths.of("crashing", heron_home).container_logs(0) / "sum-2.log"
    assert (p.returncode, p.stdout) == (1, "")
    assert p.stderr == (f"heron-py: error: topology 'crashing' did not start: task 2 (component 'sum') died twice "
                        f"before it initialized, of the same error: FileNotFoundError: [Errno 2] No such file or "
                        f"directory: '/nonexistent/words.txt' (its log: {log})\n")
    assert took < 20, f"the submit took {took:.1f} s; expected it to end at the second crash, not after --wait (60 s)"
    assert run_cli(heron_home, "list").stdout == ""  # killed and removed, its logs kept
    assert log.is_file()


def test_metrics_carry_the_counters_right_after_submit_and_restarts_start_at_0(
        heron_home: Path, topology_file: Path) -> None:
    # the default export interval (10 s): the counters must not wait for it
    p = run_cli(heron_home, "submit", str(topology_file), "firsthour", timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("topology 'firsthour' is running: 2 tasks in 1 container (logs: ")
    submitted = time.monotonic()
    shown = ""
    while time.monotonic() - submitted < 5:
        shown = run_cli(heron_home, "metrics", "firsthour", "--component", "numbers").stdout
        if re.search(r"^  __emit-count/default +\d+$", shown, re.M):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"no emit count 5 s after the submit; heron-py metrics showed:\n{shown}")
    assert shown.splitlines()[0] == "numbers: tasks 1"
    assert {line.split()[0] for line in shown.splitlines()[1:]} >= {
        "__emit-count/default", "__ack-count", "__fail-count", "__time-blocked-ms"}

    paths = TopologyPaths.of("firsthour", heron_home)
    port = json.loads((paths.container(0) / "metricsmgr.json").read_text())["http_port"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    restarts = sorted(line for line in text.splitlines() if line.startswith("heron_restarts_total{"))
    assert restarts == [
        f'heron_restarts_total{{container="0",process="{p}",topology="firsthour"}} 0.0'
        for p in ("metricsmgr", "numbers-1", "stmgr", "sum-2", "tmanager")]
