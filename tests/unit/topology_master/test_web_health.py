"""The web page's health manager panel, its words (topology_master/web/app.js actionText,
outcomeText, diagnosesByComponent, run by node) for steps ``heron-py autoscale`` really
records: the action taken or why none, what came of it, the diagnoses per component."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit.autoscale_steps import UNREACHABLE, UPDATE_FAILED, four_steps

APP_JS = Path(__file__).resolve().parents[3] / "topology_master" / "web" / "app.js"
FUNCTIONS = ("actionText", "outcomeText", "diagnosesByComponent")
NONE = "\u2013"  # the page's dash for nothing


def _run(expr: str) -> Any:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the page's functions are plain JS run by node here")
    src = APP_JS.read_text()
    parts = [re.search(rf"^function {name}\(.*?^\}}$", src, re.M | re.S) for name in FUNCTIONS]
    assert all(parts), "app.js lost one of " + ", ".join(FUNCTIONS)
    script = "\n".join(m.group(0) for m in parts if m) + f"\nconsole.log(JSON.stringify({expr}));"
    return json.loads(subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30,
                                     check=True).stdout)


def test_each_step_says_what_it_did_or_why_not_and_what_came_of_it(tmp_path: Path) -> None:
    steps = four_steps(tmp_path / "autoscale.jsonl")
    got = _run(f"{json.dumps(steps)}"
               ".map((s) => [actionText(s), outcomeText(s), diagnosesByComponent(s.diagnoses || [])])")
    why = steps[0]["action"]["why"]
    assert why.startswith("count is under-provisioned: its tasks were busy 100% of the window")
    diagnosis = steps[0]["diagnoses"][0]["explanation"]
    count_under = [["count", [["under-provisioned", "under-provisioned", diagnosis]]]]
    assert got[0] == [["scale count 1 → 2", why], f"FAILED: {UPDATE_FAILED}", count_under]
    assert got[1] == [["scale count 1 → 2", why], "done: updated: count -> 2", count_under]
    assert got[2][0] == ["none", "cooldown: 30 s left of 60 s after the action at 1700000005"]
    assert got[2][1] == NONE
    assert got[3] == [["no observation", UNREACHABLE], NONE, []]


def test_a_restart_a_dry_run_and_diagnoses_of_tasks() -> None:
    step = {"decision": "restart", "action": {"kind": "restart", "container": 2, "why": "split-4 is slow"},
            "outcome": {"dry_run": True}, "diagnoses": [
                {"kind": "slow instance", "component": "split", "task": 4, "explanation": "split-4 is slow"},
                {"kind": "data skew", "component": "count", "task": None, "explanation": "hot key"},
                {"kind": "under-provisioned", "component": "split", "task": None, "explanation": "busy"}]}
    assert _run(f"(s => [actionText(s), outcomeText(s), diagnosesByComponent(s.diagnoses)])({json.dumps(step)})") == [
        ["restart container 2", "split-4 is slow"], "dry run: not carried out",
        [["split", [["slow instance (task 4)", "slow instance", "split-4 is slow"],
                    ["under-provisioned", "under-provisioned", "busy"]]],
         ["count", [["data skew", "data skew", "hot key"]]]]]
