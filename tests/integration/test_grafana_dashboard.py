"""The Grafana dashboard in deploy/grafana/ against what a running topology really exports:
every metric name its queries use is in a live /metrics output of the metrics managers."""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from tests.conftest import EXAMPLES
from tests.support import wait_for

pytestmark = pytest.mark.integration
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "heron-py.json"
# a PromQL identifier that names a heron-py series (functions and labels do not start so)
METRIC = re.compile(r"\bheron_[a-z0-9_]+")


def _exprs(doc: dict) -> list[str]:
    out = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    out += [v["query"]["query"] for v in doc["templating"]["list"] if isinstance(v.get("query"), dict)]
    return out


def _scrape(home: Path, name: str) -> set[str]:
    names: set[str] = set()
    for k in (0, 1):
        mm = json.loads((TopologyPaths.of(name, home).container(k) / "metricsmgr.json").read_text())
        text = urllib.request.urlopen(f"http://127.0.0.1:{mm['http_port']}/metrics", timeout=5).read().decode()
        names |= {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    return names


def test_every_metric_of_the_dashboard_is_exported(heron_home: Path) -> None:
    doc = json.loads(DASHBOARD.read_text())
    used = {m for e in _exprs(doc) for m in METRIC.findall(e)}
    assert len(used) >= 10, used  # throughput, latency, acks/fails, backpressure, restarts, RSS/CPU
    assert {p["fieldConfig"]["defaults"]["unit"] for p in doc["panels"]} >= {"ops", "ms", "bytes"}
    # acking on (complete latency), two containers (stream managers' backpressure series)
    run_local(EXAMPLES / "reliable_word_count.py", ["--sentences", "100000000", "--rate", "200"], home=heron_home,
              name="wc_grafana", keep_running=True, properties={"topology.metrics.export.interval.secs": "1"})
    # restarts are exported once a process restarted: kill one task; its executor restarts it
    state = LocalFsStateManager(heron_home)
    pid = wait_for(lambda: ((state.get_execution_state("wc_grafana") or {}).get("instances", {}).get("5", {})
                            .get("pid")), 30, "task 5's pid")
    os.kill(int(pid), signal.SIGKILL)
    exported: set[str] = set()
    deadline = time.monotonic() + 40
    while not used <= exported and time.monotonic() < deadline:
        time.sleep(1.0)
        exported = _scrape(heron_home, "wc_grafana")
    print(f"\nthe dashboard uses {len(used)} metrics, all among the {len(exported)} exported: {sorted(used)}")
    assert used <= exported, sorted(used - exported)
