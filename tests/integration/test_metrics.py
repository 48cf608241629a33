"""Metrics on real processes: the topology master's HTTP API (every endpoint, and a bolt's
exception with its traceback), the metrics manager's Prometheus endpoint scraped by a real
Prometheus server, and the web page rendered by headless Chromium.

The HTTP API and the web page only read a running boom topology: they share one, launched once
for the module (``boom``); the Prometheus test runs its own word count (its exact emit count)."""

import json
import re
import shutil
import socket
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from tests.conftest import EXAMPLES
from tests.integration._shared_topology import running
from tests.support import Prometheus
from tests.support import run_cli as _cli
from tests.support import wait_for as _wait

pytestmark = pytest.mark.integration
BOOM = Path(__file__).resolve().parent / "topologies" / "boom.py"


@pytest.fixture(scope="module")
def boom(tmp_path_factory):
    """The module's boom topology (its home): 200000 numbers at about 1000 a second, so it runs
    past every test that reads it; killed at the module's end."""
    home = tmp_path_factory.mktemp("boom") / "heron-home"
    home.mkdir()
    with running(home, BOOM, ["200000"], name="boom"):
        yield home


def _get(base, path, **params):
    url = base + path + ("?" + urllib.parse.urlencode(params, doseq=True) if params else "")
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _base(home, name):
    loc = LocalFsStateManager(home).get_tmanager_location(name)
    return f"http://{loc.host}:{loc.http_port}"


def test_real_prometheus_scrapes_the_split_emit_count(heron_home, tmp_path):
    n = 200_000  # the test's own count: the spout emits n sentences of 10 words each
    run_local(EXAMPLES / "word_count.py", ["--sentences", str(n)], home=heron_home, name="wc_prom",
              keep_running=True, properties={"topology.metrics.export.interval.secs": "1"})
    base = _base(heron_home, "wc_prom")
    _wait(lambda: len(_get(base, "/topologies/physicalplan")[1]["result"]["metricsmgrs"]) == 2, 30,
          "both metrics managers")
    proc = _cli(heron_home, "prometheus-config", "local", "wc_prom")
    assert proc.returncode == 0, proc.stderr
    targets = json.loads(proc.stdout)
    assert targets[0]["labels"] == {"job": "heron-py", "heron_topology": "wc_prom"} and len(targets[0]["targets"]) == 2
    (tmp_path / "targets.json").write_text(proc.stdout)
    prom = Prometheus(tmp_path, "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                      "scrape_configs:\n  - job_name: heron-py\n    file_sd_configs:\n"
                      f"      - files: ['{tmp_path / 'targets.json'}']\n        refresh_interval: 1s\n")
    try:
        expected = 10 * n
        got = _wait(lambda: (v := prom.query('sum(heron_emit_count_total{component="split"})')) is not None
                    and v >= 0.95 * expected and v, 90, "Prometheus to report the split bolt's emit count")
        print(f"\nPrometheus: split emitted {got:,.0f}; the test expects {expected:,}")
        assert abs(got - expected) <= 0.05 * expected
    finally:
        prom.close()


def test_http_api_every_endpoint_and_a_bolt_exception(boom):
    heron_home = boom
    base = _base(heron_home, "boom")

    def exceptions():
        code, doc = _get(base, "/topologies/exceptions")
        return doc["result"] if code == 200 and doc["result"] else None

    exc = _wait(exceptions, 30, "the bolt's exception in /topologies/exceptions")
    assert len(exc) == 1 and exc[0]["component"] == "boom" and exc[0]["count"] == 1
    assert exc[0]["stacktrace"].startswith("Traceback (most recent call last):")
    assert exc[0]["stacktrace"].rstrip().endswith("ValueError: boom: thirteen is unlucky")
    assert 'in process\n    raise ValueError("boom: thirteen is unlucky")' in exc[0]["stacktrace"]
    code, doc = _get(base, "/topologies/exceptions", component="sink")
    assert (code, doc["result"]) == (200, [])

    code, doc = _get(base, "/topologies")
    assert (code, doc["status"], doc["result"]) == (200, "success", {"local": {"default": ["boom"]}})
    _, doc = _get(base, "/topologies/logicalplan")
    lp = doc["result"]
    assert sorted(lp["spouts"]) == ["numbers"] and sorted(lp["bolts"]) == ["boom", "sink"]
    assert lp["bolts"]["sink"]["inputs"] == [{"component_name": "boom", "stream_name": "default",
                                              "grouping": "SHUFFLE", "fields": []}]
    _, doc = _get(base, "/topologies/physicalplan")
    pp = doc["result"]
    assert pp["spouts"] == {"numbers": [1]} and pp["bolts"] == {"boom": [2], "sink": [3, 4]}
    assert sorted(pp["metricsmgrs"]) == ["0", "1"] and all(m["http_port"] for m in pp["metricsmgrs"].values())
    assert sorted(pp["stmgrs"]) == ["0", "1"]
    _, doc = _get(base, "/topologies/execution_state")
    assert doc["result"]["topology"] == "boom" and doc["result"]["state"] == "RUNNING"

    def sink_metrics():
        _, d = _get(base, "/topologies/metrics", component="sink")
        m = d["result"]["metrics"]
        done = sum(m.get("__execute-count/boom/default", {}).values())
        return m if done > 2000 and "user/mean_n" in d["result"]["metricnames"] else None

    m = _wait(sink_metrics, 30, "the sink's metrics")
    assert sorted(m["__execute-count/boom/default"]) == ["3", "4"]
    assert sorted(m["__emit-count/default"].values()) == [0.0, 0.0]  # the sink emits nothing
    _, doc = _get(base, "/topologies/metrics/timeline", component="sink", metricname="__execute-count/boom/default")
    tl = doc["result"]["timeline"]["__execute-count/boom/default"]
    assert sorted(tl) == ["3", "4"] and all(len(points) >= 2 for points in tl.values())

    # errors: one clear message each
    assert _get(base, "/topologies/metrics") == (400, {
        "status": "failure", "executiontime": pytest.approx(0, abs=1), "message":
        "expected a component parameter (one of numbers, boom, sink), found none", "version": "heron-py 0.1",
        "result": None})
    code, doc = _get(base, "/topologies/metrics", component="nope")
    assert (code, doc["message"]) == (404, "topology 'boom' has no component 'nope'; expected one of numbers, "
                                           "boom, sink")
    code, doc = _get(base, "/topologies/metrics", component="sink", interval="soon")
    assert (code, doc["message"]) == (400, "parameter interval: expected a number, found 'soon'")
    code, doc = _get(base, "/topologies", topology="other")
    assert (code, doc["message"]) == (404, "topology 'other' is not managed by this topology master "
                                           "(it manages 'boom')")
    req = urllib.request.Request(base + "/topologies", method="POST", data=b"x")
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert (e.value.code, e.value.read()) == (405, b"method 'POST' not allowed; expected GET")
    host, port = base[len("http://"):].split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 431 ")

    # the CLI reads the same API
    proc = _cli(heron_home, "metrics", "local", "boom", "--component", "sink")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("sink: tasks 3, 4\n")
    assert re.search(r"^  __execute-count/boom/default +\d+ +\d+$", proc.stdout, re.M)
    proc = _cli(heron_home, "metrics", "local", "boom", "--component", "nope")
    assert (proc.returncode, proc.stderr) == (
        1, "heron-py: error: topology 'boom' has no component 'nope'; expected one of numbers, boom, sink\n")
    status = _cli(heron_home, "status", "local", "boom")
    assert f"web page and HTTP API: {base}/" in status.stdout

    # the file sink and the restart count of the task that died
    logs = TopologyPaths.of("boom", heron_home).logs
    lines = [json.loads(x) for f in logs.glob("container-*/metrics.jsonl") for x in f.read_text().splitlines()]
    assert lines and {ln["topology"] for ln in lines} == {"boom"}
    texts = {}
    for k in (0, 1):
        mm = json.loads((TopologyPaths.of("boom", heron_home).container(k) / "metricsmgr.json").read_text())
        texts[k] = urllib.request.urlopen(f"http://127.0.0.1:{mm['http_port']}/metrics", timeout=5).read().decode()
    boom_container = pp["instances"]["2"]["container"]
    assert re.search(rf'^heron_restarts_total\{{container="{boom_container}",process="boom-2",topology="boom"\}} 1\.0$',
                     texts[boom_container], re.M)
    # a MultiCount metric: one series per key. Which sink task sees which parity depends on
    # where boom's shuffle stood when it restarted (random), so the keys are checked across
    # both tasks: the sinks see every number, so both keys exist, each on a task label
    for key in ("even", "odd"):
        assert re.search(rf'^heron_user_parity\{{.*key="{key}".*task="[34]".*\}} \d', texts[0] + texts[1], re.M)


def test_web_page_renders_in_headless_chromium(boom, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is missing: apt-get install -y chromium (scripts/setup.sh does)")
    base = _base(boom, "boom")
    # a few metrics reports, so the charts have points
    _wait(lambda: len(_get(base, "/topologies/metrics/timeline", component="numbers",
                           metricname="__emit-count/default")[1]["result"]["timeline"]
                      .get("__emit-count/default", {}).get("1", {})) >= 4, 30, "four reports of the spout")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--virtual-time-budget=8000", "--window-size=1280,1400", f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*flags, "--dump-dom", base + "/"], capture_output=True, text=True, timeout=120).stdout
    shot = tmp_path / "web.png"
    subprocess.run([*flags, f"--screenshot={shot}", base + "/"], capture_output=True, timeout=120)
    nodes = set(re.findall(r'class="node (?:spout|bolt)" data-component="(\w+)"', dom))
    assert nodes == {"numbers", "boom", "sink"}, dom[:2000]
    assert len(re.findall(r'<line class="edge"', dom)) == 2
    points = {(c, m): int(p) for m, c, p in re.findall(
        r'class="chart (\w+)"[^>]*data-component="(\w+)"[^>]*data-points="(\d+)"', dom)}
    assert points[("numbers", "throughput")] >= 2 and "<polyline" in dom, points
    assert len(re.findall(r'<tr data-key="\d+"><td data-col="task">\d+</td><td data-col="component">'
                          r"(?:numbers|boom|sink)</td>", dom)) == 4
    assert 'class="exception" data-task="2"' in dom and "ValueError: boom: thirteen is unlucky" in dom
    assert shot.is_file() and shot.stat().st_size > 10_000
    print(f"\nscreenshot: {shot}")
