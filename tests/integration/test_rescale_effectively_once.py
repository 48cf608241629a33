"""Rescaling an effectively-once topology (``heron-py update``) on real processes: the stateful
word count's keyed ``count`` goes 2 -> 3 -> 2 -> 3 tasks mid-run, each update after a checkpoint
taken under the packing before it, live (every kept task keeps its process; every task restores
the newest checkpoint under the new plan), and the counts in the final checkpoint are exactly a
plain Python count of the input: each update's restore split the checkpointed counts by key group over
the new tasks, the spouts replayed from their checkpointed positions, and no word was lost or
counted twice. A component whose state cannot be split is refused in one line, before anything
stops."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from heron_py.testing.local import kill_local
from tests.integration.test_effectively_once import _checkpoints_done, _finish_exact, _logs, _start, _state
from tests.support import run_cli, wait_for

pytestmark = pytest.mark.integration


def _count_tasks(name: str) -> list[int]:
    return sorted(t.task_id for t in _state().get_packing_plan(name).tasks if t.component == "count")


def _pids(name: str) -> dict[str, int]:
    """Task -> pid of every task in the stored packing, as the master last wrote them."""
    tasks = {str(t.task_id) for t in _state().get_packing_plan(name).tasks}
    instances = (_state().get_execution_state(name) or {}).get("instances", {})
    return {t: int(i["pid"]) for t, i in instances.items() if t in tasks and i.get("pid")}


def test_counts_stay_exact_through_three_rescales_and_a_keyless_state_is_refused(heron_home: Path) -> None:
    run = _start(heron_home, "eo_rescale", rate=500)  # about 36 s of input: the updates land mid-run
    try:
        wait_for(lambda: _checkpoints_done(heron_home, run.name) >= 1, 60, "a first checkpoint")
        refused = run_cli(heron_home, "update", "local", run.name, "--component-parallelism", "sentence:3")
        assert refused.returncode == 1 and refused.stderr == (
            f"heron-py: error: update: topology '{run.name}' is EFFECTIVELY_ONCE and component 'sentence' keeps "
            f"checkpointed state that cannot be split from 2 to 3 tasks: its inputs are not all fields grouped, so "
            f"its state is not known to be keyed; expected a component whose every input is fields grouped, or "
            f"topology.component.state.rescale: merge in its config (every new task gets every old task's "
            f"entries)\n")
        took = []
        for n in (3, 2, 3):
            before = _pids(run.name)
            t0 = time.monotonic()
            update = run_cli(heron_home, "update", "local", run.name, "--component-parallelism", f"count:{n}")
            took.append(time.monotonic() - t0)
            assert update.returncode == 0, update.stderr
            assert "(live: " in update.stdout, update.stdout
            assert len(_count_tasks(run.name)) == n
            # live: every task the update kept runs on in its process (a restore, not a restart)
            after = _pids(run.name)
            kept = {t: p for t, p in before.items() if t in after}
            assert kept and {t: after[t] for t in kept} == kept, (before, after)
            # the next update splits a checkpoint taken under this packing: counted from the
            # switch (those that completed while the added tasks started were the old packing's)
            done = _checkpoints_done(heron_home, run.name)
            wait_for(lambda d=done: _checkpoints_done(heron_home, run.name) >= d + 2, 60,
                     "checkpoints under the new packing")
        _finish_exact(heron_home, run.name)
        split_lines = re.findall(r"state of 'count' split from (\d) to (\d) tasks \(keyed\)",
                                 _logs(heron_home, run.name, "container-*/*.log"))
        assert {("2", "3"), ("3", "2")} <= set(split_lines), split_lines
        rescale_restores = re.findall(r"restore \d+ to checkpoint \d+ \(rescale: plan v\d+",
                                      _logs(heron_home, run.name, "container-*/stmgr.log"))
        assert len(rescale_restores) >= 3, rescale_restores
        print(f"update durations (s): {[round(t, 2) for t in took]}")
    finally:
        kill_local(heron_home, run.name)
