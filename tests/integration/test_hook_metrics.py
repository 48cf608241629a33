"""Task hooks on real processes: a hook counting every event (topology.auto.task.hooks) sees
exactly what each task's exported metrics count: emitted, acked, failed, executed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.testing import run_local
from heron_py.testing.local import complete_lines, kill_local
from tests.support import wait_for

pytestmark = pytest.mark.integration

TOPOLOGY = Path(__file__).resolve().parent / "topologies" / "hooked.py"
N = 400


def _hooks(folder: Path) -> dict[int, dict[str, int]]:
    return {int(f.stem.split("-")[1]): json.loads(f.read_text()) for f in folder.glob("hook-*.json")}


def _last_reports(home: Path, name: str) -> dict[int, dict]:
    last: dict[int, dict] = {}
    for f in TopologyPaths.of(name, home).logs.glob("container-*/metrics.jsonl"):
        for line in complete_lines(f):
            for r in json.loads(line).get("reports", []):
                if r.get("kind") == "instance":
                    last[r["task"]] = r
    return last


def _metric_counts(report: dict) -> dict[str, int]:
    c = report["counters"]
    spout = report["component"] == "numbers"
    out = {"emit": sum(v for k, v in c.items() if k.startswith("__emit-count/"))}
    if spout:
        out.update(spout_ack=c.get("__ack-count", 0), spout_fail=c.get("__fail-count", 0))
    else:
        out.update(bolt_ack=c.get("__ack-count", 0), bolt_fail=c.get("__fail-count", 0),
                   bolt_execute=sum(v for k, v in c.items() if k.startswith("__execute-count/")))
    return {k: v for k, v in out.items() if v}


def test_a_counting_hook_equals_the_tasks_metrics(heron_home: Path, tmp_path: Path) -> None:
    run = run_local(TOPOLOGY, home=heron_home, keep_running=True, properties={"test.hook.dir": str(tmp_path)})
    try:
        # every number is acked or failed at the spout: the hooks have seen the whole run
        def settled() -> bool:
            spout = _hooks(tmp_path).get(1, {})
            return spout.get("spout_ack", 0) + spout.get("spout_fail", 0) == N

        wait_for(settled, 60, "every root acked or failed")
        hooks = _hooks(tmp_path)

        def metrics_caught_up() -> bool:
            reports = _last_reports(heron_home, run.name)
            return len(reports) == 5 and all(_metric_counts(reports[t]) == {k: v for k, v in hooks[t].items() if v}
                                             for t in hooks)

        wait_for(metrics_caught_up, 20, "metrics equal to the hooks' counts")
    finally:
        kill_local(heron_home, run.name)
    assert hooks[1] == {"emit": N, "spout_ack": N - N // 5, "spout_fail": N // 5}
    halvers = [hooks[t] for t in hooks if t in (2, 3)]
    assert sum(h["bolt_execute"] for h in halvers) == N
    assert sum(h.get("bolt_fail", 0) for h in halvers) == N // 5
