"""heron_py.instance.gc.threshold and heron_py.instance.switch.interval.ms reach each task's
process: the topology's value, or a component's own."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.support import wait_for

pytestmark = pytest.mark.integration

TOPOLOGY = Path(__file__).resolve().parent / "topologies" / "gc_threshold.py"


@pytest.mark.parametrize("topology_value, spout_gen0, spout_switch",
                         [(None, 10000, 0.005), (("1234", "2"), 1234, 0.002)])
def test_each_task_runs_with_its_gc_threshold_and_switch_interval(heron_home: Path, tmp_path: Path,
                                              topology_value: tuple[str, str] | None, spout_gen0: int,
                                              spout_switch: float) -> None:
    props = {"test.gc.dir": str(tmp_path)}
    if topology_value is not None:
        props["heron_py.instance.gc.threshold"], props["heron_py.instance.switch.interval.ms"] = topology_value
    run = run_local(TOPOLOGY, home=heron_home, keep_running=True, properties=props)
    try:
        files = {"one": tmp_path / "gc-one-1.json", "report": tmp_path / "gc-report-2.json"}
        wait_for(lambda: all(f.exists() for f in files.values()), 60, "both tasks wrote their gc threshold")
        got = {name: json.loads(f.read_text()) for name, f in files.items()}
    finally:
        kill_local(heron_home, run.name)
    # the older generations keep CPython's own thresholds
    _, gen1, gen2 = gc.get_threshold()
    assert got == {"one": {"gc": [spout_gen0, gen1, gen2], "switch": pytest.approx(spout_switch)},
                   "report": {"gc": [2500, gen1, gen2], "switch": pytest.approx(0.0005)}}
