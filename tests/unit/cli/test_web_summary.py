"""The web page's topology summary (topology_master/web/app.js summaryCells, run by node):
acked and failed are the spouts' tuple trees, as in Storm UI, not the sum over every bolt's
acks too; and a count of one is singular in the graph's tooltip."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

APP_JS = Path(__file__).resolve().parents[3] / "topology_master" / "web" / "app.js"


def _run(functions: tuple[str, ...], expr: str) -> object:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the page's functions are plain JS run by node here")
    src = APP_JS.read_text()
    parts = [re.search(rf"^const {name} = .*$", src, re.M) for name in ("num", "counted", "WINDOW_NAMES")]
    parts += [re.search(rf"^function {name}\(.*?^\}}$", src, re.M | re.S) for name in functions]
    assert all(parts), "app.js lost one of num, counted, WINDOW_NAMES or " + ", ".join(functions)
    script = "\n".join(m.group(0) for m in parts if m) + f"\nconsole.log(JSON.stringify({expr}));"
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30, check=True).stdout
    return json.loads(out)


def test_the_summary_shows_the_spouts_acks_not_every_components() -> None:
    # a word count over 400 sentences: the spout's 400 trees, acked by split (400) and count (2,600) too
    summary = {"window": "600", "components": {
        "sentence": {"kind": "spout", "emitted": 400, "transferred": 400, "acked": 400, "failed": 2},
        "split": {"kind": "bolt", "emitted": 2600, "transferred": 2600, "acked": 400, "failed": 0},
        "count": {"kind": "bolt", "emitted": 0, "transferred": 0, "acked": 2600, "failed": 5}}}
    es = {"topology": "wc", "state": "RUNNING", "pplan_version": 3, "stmgrs": {"0": {}},
          "instances": {"1": {}, "2": {}, "3": {}}}
    assert _run(("summaryCells",), f"summaryCells({json.dumps(summary)}, {json.dumps(es)})") == [
        ["name", "wc"], ["state", "RUNNING"], ["plan", "v3"], ["containers", "1"], ["tasks", "3"],
        ["window", "10 min"], ["emitted", "3,000", 3000], ["transferred", "3,000", 3000], ["acked", "400", 400],
        ["failed", "2", 2]]


def test_counts_are_singular_for_one() -> None:
    assert _run((), '[counted(1, "task"), counted(2, "task"), counted(1200, "container")]') == [
        "1 task", "2 tasks", "1,200 containers"]
