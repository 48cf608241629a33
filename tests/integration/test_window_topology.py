"""heronpy's sliding window bolt on real processes: the window example logs its averages
every slide interval, and tuples leaving the window are acked back to the spouts."""

import re
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.support import wait_for

pytestmark = pytest.mark.integration

TOPOLOGY = Path(__file__).resolve().parent / "topologies" / "window_sizes.py"


def test_window_example_logs_averages_and_acks(heron_home):
    run = run_local(TOPOLOGY, home=heron_home, keep_running=True)
    logs = TopologyPaths.of(run.name, heron_home).logs
    try:
        def text(pattern):
            return "".join(f.read_text() for f in logs.glob(pattern))

        # ticks every 2 s from the rate the bolt set in initialize(); 12 s: the window is full
        # and the first tuples have left it (and been acked)
        wait_for(lambda: len(re.findall(r"The current average is [\d.]+", text("container-*/count_bolt-*.log"))) >= 10
                 and "acked 100" in text("container-*/word_spout-*.log"), 40, "averages and acks")
        averages = [float(x) for x in re.findall(r"The current average is ([\d.]+)",
                                                 text("container-*/count_bolt-*.log"))]
        assert max(averages) > 0
        assert "Traceback" not in text("container-*/*.log")
    finally:
        kill_local(heron_home, run.name)
