"""The web page in a real browser (Debian's chromium, headless, driven over the Chrome DevTools
protocol with aiohttp) against a running word count: the component table agrees with
``heron-py metrics``, a task's log opens, deactivate and activate from the page change what
``heron-py status`` says. Screenshots go to the test's tmp_path (printed at the end)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from heron_py.cli.autoscale_log import LOG_FILE, AutoscaleLog
from heron_py.common.config import LogCaps
from heron_py.common.container_layout import TopologyPaths
from heron_py.testing import run_local
from tests.conftest import EXAMPLES
from tests.support import run_cli

pytestmark = pytest.mark.integration
NAME = "wc_web"
RATE = 300  # sentences per second: a steady flow, so pausing it shows


class Browser:
    """One headless Chromium and one page, over the DevTools protocol."""

    def __init__(self, chromium: str, profile: Path) -> None:
        self.proc = subprocess.Popen([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                                      "--disable-dev-shm-usage", "--remote-debugging-port=0",
                                      f"--user-data-dir={profile}", "--window-size=1400,1000", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.profile = profile
        self.session: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None
        self._id = 0

    async def connect(self) -> None:
        port_file = self.profile / "DevToolsActivePort"
        for _ in range(300):
            if port_file.exists() and port_file.read_text().strip():
                break
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        self.session = aiohttp.ClientSession()
        async with self.session.get(f"http://127.0.0.1:{port}/json/list") as r:
            pages = [t for t in await r.json() if t["type"] == "page"]
        self.ws = await self.session.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        assert self.ws is not None
        self._id += 1
        await self.ws.send_json({"id": self._id, "method": method, "params": params})
        while True:
            msg = json.loads((await asyncio.wait_for(self.ws.receive(), 30)).data)
            if msg.get("id") == self._id:
                if "error" in msg:
                    raise AssertionError(f"{method}: {msg['error']}")
                result: dict[str, Any] = msg["result"]
                return result

    async def eval(self, expr: str) -> Any:
        res = await self.call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in res:
            raise AssertionError(f"{expr}: {res['exceptionDetails']}")
        return res["result"].get("value")

    async def wait(self, expr: str, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            v = await self.eval(expr)
            if v:
                return v
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what}")
            await asyncio.sleep(0.3)

    async def screenshot(self, path: Path) -> None:
        res = await self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(res["data"]))

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.session is not None:
            await self.session.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def _cell(component: str, col: str) -> str:
    return (f"Number((document.querySelector('tr[data-key=\"{component}\"] td[data-col=\"{col}\"]') || "
            "{dataset: {}}).dataset.value || 0)")


def _cli_total(home: Path, component: str, metric: str) -> int:
    proc = run_cli(home, "metrics", "local", NAME, "--component", component)
    assert proc.returncode == 0, proc.stderr
    m = re.search(rf"^  {re.escape(metric)} +([\d ]+)$", proc.stdout, re.M)
    assert m, proc.stdout
    return sum(int(v) for v in m.group(1).split())


def _state(home: Path) -> str:
    out = run_cli(home, "status", "local", NAME).stdout
    m = re.match(rf"topology {NAME}: (\w+),", out)
    assert m, out
    return m.group(1)


async def _agreement(b: Browser, home: Path) -> None:
    """The page's all-time numbers against the CLI's totals, read between two page reads: the
    CLI's value must lie between them, give or take one report interval of throughput. The four
    cells are read together (one refresh wait before, one after: the CLI reads sit between the
    two page reads of each cell all the same), not one after another."""
    await b.eval("document.getElementById('window').value = 'all'; "
                 "document.getElementById('window').dispatchEvent(new Event('change')); true")
    slack = 2 * RATE  # one 1 s report interval, twice (the page and the CLI read at different moments)
    cells = (("sentence", "emitted", "__emit-count/default"), ("sentence", "acked", "__ack-count"),
             ("split", "emitted", "__emit-count/default"), ("count", "acked", "__ack-count"))
    for comp, col, _ in cells:
        await b.wait(f"{_cell(comp, col)} > 0", 30, f"a non-zero {col} for {comp} on the page")
    await asyncio.sleep(3.5)  # a refresh after the window changed
    before = [await b.eval(_cell(comp, col)) for comp, col, _ in cells]
    cli = [await asyncio.to_thread(_cli_total, home, comp, metric) for comp, _, metric in cells]
    await asyncio.sleep(3.5)  # a refresh after the CLI's reads
    after = [await b.eval(_cell(comp, col)) for comp, col, _ in cells]
    for (comp, col, _), lo, total, hi in zip(cells, before, cli, after, strict=True):
        print(f"\n{comp} {col}: page {lo}..{hi}, heron-py metrics {total}")
        factor = 10 if comp == "split" else 1  # ten words a sentence
        assert lo > 0 and lo - slack * factor <= total <= hi + slack * factor


async def _session(chromium: str, tmp_path: Path, home: Path, page: str) -> None:
    b = Browser(chromium, tmp_path / "profile")
    try:
        await b.connect()
        await b.call("Page.enable")
        await b.call("Page.navigate", url=page)
        await b.wait("document.querySelectorAll('#spouts tbody tr').length === 1", 30, "the spouts table")
        # the default window (10 min): the spout's chart has points from its first report on
        await b.wait("Number(document.querySelector('svg.chart.throughput[data-component=\"sentence\"]')"
                     "?.dataset.points) >= 4", 30, "two buckets in the spout's chart")
        await b.screenshot(tmp_path / "0-overview-10min.png")
        await _agreement(b, home)
        # marks and labels on the graph: the fields grouping's label whole, inside the drawing
        label = await b.eval("[...document.querySelectorAll('#graph .edge-label')].map(t => t.textContent)")
        assert "FIELDS(word)" in label
        fits = await b.eval("(() => { const s = document.getElementById('graph'), r = s.getBoundingClientRect();"
                            " return [...s.querySelectorAll('text')].every(t => { const b = t.getBoundingClientRect();"
                            " return b.left >= r.left && b.right <= r.right && b.top >= r.top && "
                            "b.bottom <= r.bottom; }); })()")
        assert fits, "a text of the graph is outside the drawing"
        points = await b.eval("document.querySelector('svg.chart.throughput[data-component=\"sentence\"]')"
                              ".dataset.points")
        assert int(points) >= 2
        await b.screenshot(tmp_path / "1-overview.png")

        # a task's log
        await b.eval("document.querySelector('a.log-link[data-task=\"1\"]').click(); true")
        text = await b.wait("document.getElementById('log-text').dataset.task === '1' && "
                            "document.getElementById('log-text').textContent", 20, "the log of task 1")
        assert "sentence" in text, text[-2000:]
        await b.screenshot(tmp_path / "2-log.png")

        # the health manager's panel: none ran yet; then a step written into its record shows
        assert await b.eval("document.getElementById('health-none').textContent") == \
            "not running (heron-py autoscale has written no step)"
        assert await b.eval("document.getElementById('health-none').hidden") is False
        why = "cooldown: 30 s left of 60 s after the action at 0"
        step = {"time": time.time(), "decision": "none", "window_secs": 30.0, "throughput": float(RATE),
                "parallelism": {"count": 1, "sentence": 1, "split": 1}, "state": "settling", "sizing": [],
                "diagnoses": [{"kind": "under-provisioned", "component": "count", "task": None, "container": None,
                               "explanation": "count is under-provisioned: its tasks were busy 100% of the window"}],
                "action": {"kind": "none", "why": why}, "outcome": None, "skipped": []}
        AutoscaleLog(TopologyPaths.of(NAME, home).logs / LOG_FILE, LogCaps()).append(step)
        await b.wait("document.querySelectorAll('#health-steps tbody tr').length === 1", 10, "the step on the page")
        assert await b.eval("document.getElementById('health-none').hidden") is True
        assert await b.eval("document.querySelector('#health-steps td[data-col=\"action\"] .why').textContent") == why
        assert await b.eval("document.querySelector('#health-steps td[data-col=\"diagnoses\"]').textContent") == \
            "count: under-provisioned"
        assert await b.eval("document.querySelector('#health-steps td[data-col=\"running\"]').textContent") == \
            "sentence 1, split 1, count 1"

        # deactivate, with its confirmation; then activate
        for action, expected in (("deactivate", "PAUSED"), ("activate", "RUNNING")):
            await b.eval(f"document.querySelector('button[data-action=\"{action}\"]').click(); true")
            await b.wait("document.getElementById('confirm').open", 10, "the confirmation")
            if action == "deactivate":
                await b.screenshot(tmp_path / "3-confirm.png")
            await b.eval("document.getElementById('confirm-ok').click(); true")
            await b.wait(f"document.getElementById('action-result').textContent.includes('{expected}')", 20,
                         f"the answer to {action}")
            state = await asyncio.to_thread(_state, home)
            assert state == expected
            await b.wait(f"document.getElementById('state').textContent === '{expected}'", 20,
                         f"the page to show {expected}")
            if action == "deactivate":
                await b.screenshot(tmp_path / "4-paused.png")
    finally:
        await b.close()


def test_web_page_in_chromium(heron_home: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is missing: apt-get install -y chromium (scripts/setup.sh does)")
    run_local(EXAMPLES / "reliable_word_count.py", ["--sentences", "100000000", "--rate", str(RATE)], home=heron_home,
              name=NAME, keep_running=True, properties={"topology.metrics.export.interval.secs": "1"})
    status = run_cli(heron_home, "status", "local", NAME)
    m = re.search(r"web page and HTTP API: (http://\S+/#token=[0-9a-f]{64})$", status.stdout, re.M)
    assert m, status.stdout
    asyncio.run(_session(chromium, tmp_path, heron_home, m.group(1)))

    # every action in the master's log with its origin
    log = (TopologyPaths.of(NAME, heron_home).logs / "container-0" / "tmanager.log").read_text()
    assert re.search(r"web action deactivate from 127\.0\.0\.1$", log, re.M), log[-3000:]
    assert re.search(r"web action activate from 127\.0\.0\.1$", log, re.M)
    print(f"\nscreenshots: {sorted(str(p) for p in tmp_path.glob('*.png'))}")


def test_logs_follow(heron_home: Path) -> None:
    run_local(EXAMPLES / "reliable_word_count.py", ["--sentences", "100000000", "--rate", "50"], home=heron_home,
              name="wc_follow", keep_running=True)
    log = TopologyPaths.of("wc_follow", heron_home).logs / "container-0" / "tmanager.log"
    proc = subprocess.Popen([sys.executable, "-m", "heron_py.cli.main", "logs", "local", "wc_follow", "tmanager", "-f"],
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "HERON_PY_HOME": str(heron_home)})
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout or ()], daemon=True).start()
    try:
        first = lines.get(timeout=20)
        assert first.startswith("==> container-") and "tmanager.log <==" in first
        time.sleep(1.5)
        # a deactivate writes a line to the master's log ("pushed physical plan ... (PAUSED)"):
        # the follower must print it
        assert run_cli(heron_home, "deactivate", "local", "wc_follow").returncode == 0
        deadline = time.monotonic() + 20
        seen = ""
        while "(PAUSED)" not in seen and time.monotonic() < deadline:
            try:
                seen = lines.get(timeout=1)
            except queue.Empty:
                pass
        assert "(PAUSED)" in seen, f"the follower did not print the master's new line; log: {log.read_text()[-1000:]}"
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
