"""The KafkaSpout's per-partition lag on its way out: Prometheus families with the topic and
the partition as labels (metrics_manager/prom.py, scraped through prometheus-client's own
exposition), the web page's per-task rows (topology_master/ui_api.py kafka_lag) and the page's
rendering function (app.js kafkaLagRows, run by node)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from metrics_manager.prom import kafka_partition_families, registry_for
from metrics_manager.store import MetricsStore
from topology_master.ui_api import kafka_lag

APP_JS = Path(__file__).resolve().parents[3] / "topology_master" / "web" / "app.js"


def _report(task: int, kafka: dict[str, float], component: str = "kafka") -> dict[str, Any]:
    return {"kind": "instance", "task": task, "component": component, "time": 1.0, "counters": {}, "gauges": {},
            "user": {"kafka": kafka}}


def test_partition_values_become_families_with_topic_and_partition_labels() -> None:
    store = MetricsStore("t", 0)
    store.update(_report(1, {"records": 7, "in.put-x-0/lag": 12, "in.put-x-0/committed": 30,
                             "in.put-x-10/lag": 0, "in.put-x-10/fetched": 5}))
    text = generate_latest(registry_for(lambda: store)).decode()
    lags = sorted(re.findall(r"^heron_kafka_partition_lag\{(.*)\} (\S+)$", text, re.M))
    assert lags == [
        ('component="kafka",container="0",partition="0",task="1",topic="in.put-x",topology="t"', "12.0"),
        ('component="kafka",container="0",partition="10",task="1",topic="in.put-x",topology="t"', "0.0")]
    assert re.search(r'^heron_kafka_partition_committed\{.*partition="0",.*topic="in.put-x".*\} 30\.0$', text, re.M)
    assert re.search(r'^heron_kafka_partition_fetched\{.*partition="10",.*topic="in.put-x".*\} 5\.0$', text, re.M)
    # the spout's other values stay by key; no partition key is left in the user family
    assert re.search(r'^heron_user_kafka\{.*key="records".*\} 7\.0$', text, re.M)
    assert "/lag" not in text


def test_families_without_the_kafka_metric_are_unchanged() -> None:
    fams = {"heron_user_other": (False, ["key", "task"], [(["a-0/lag", "1"], 3.0)])}
    assert kafka_partition_families(fams) == fams


def test_kafka_lag_per_task_from_the_latest_reports() -> None:
    reports = [_report(3, {"records": 1, "in-1/lag": 4, "in-0/lag": 2, "in-0/committed": 9}),
               _report(4, {"records": 0}),  # no partitions assigned yet
               {"kind": "stmgr", "user": {"kafka": {"in-0/lag": 99}}},
               _report(5, {"in-2/lag": True})]  # not a number: skipped
    assert kafka_lag(reports) == {3: {"in-0": 2.0, "in-1": 4.0}}


def test_the_page_renders_one_row_per_kafka_spout_task() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the page's rendering function is plain JS run by node here")
    src = APP_JS.read_text()
    num = re.search(r"^const num = .*$", src, re.M)
    fn = re.search(r"^function kafkaLagRows\(tasks\) \{.*?^\}$", src, re.M | re.S)
    assert num and fn, "app.js lost num or kafkaLagRows"
    tasks = {"tasks": {"1": {"component": "kafka", "kafka_lag": {"in-0": 1200, "in-1": 3}},
                       "2": {"component": "split"}}}
    script = f"{num.group(0)}\n{fn.group(0)}\nconsole.log(JSON.stringify(kafkaLagRows({json.dumps(tasks)})));"
    out = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30, check=True).stdout
    assert json.loads(out) == [{"key": "1", "cells": [
        ["task", "1"], ["component", "kafka"], ["partitions", "2", 2], ["lag", "1,203", 1203],
        ["by-partition", "in-0: 1,200, in-1: 3"]]}]
