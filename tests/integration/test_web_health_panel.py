"""The web page's health manager panel in a real browser (Debian's chromium, headless, over the
DevTools protocol as in test_web_ui.py), against the master's real HTTP server and page over a
fake master: with no record it says the health manager is not running; once ``heron-py
autoscale``'s writer (its real loop over a fluid model, tests/unit/autoscale_steps.py) has
recorded steps in the topology's logs folder, the next refresh lists them, newest first."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

from heron_py.cli.autoscale_log import LOG_FILE
from heron_py.planner.model import ComponentKind, GroupingKind, StreamDef, TopologyDef
from heron_py.planner.packing import round_robin
from tests.fakes import FakeApiMaster, component, grouped
from tests.integration.test_web_ui import Browser
from tests.unit.autoscale_steps import UNREACHABLE, UPDATE_FAILED, four_steps
from topology_master.http_api import Api
from topology_master.http_server import serve_http

pytestmark = pytest.mark.integration
NOT_RUNNING = "not running (heron-py autoscale has written no step)"


class Master(FakeApiMaster):
    """The fake master of the word count the steps are of (sentences, split, count), with what
    every panel of the page reads (the stream managers' metrics)."""

    def __init__(self) -> None:
        super().__init__()
        spout = component("sentences", ComponentKind.SPOUT, 1, outputs=(StreamDef("default", ("sentence",)),))
        split = component("split", ComponentKind.BOLT, 1, outputs=(StreamDef("default", ("word",)),),
                          inputs=(grouped("sentences", "default", GroupingKind.SHUFFLE),))
        count = component("count", ComponentKind.BOLT, 2, inputs=(grouped("split", "default", GroupingKind.FIELDS,
                                                                          ("word",)),))
        self._topo = TopologyDef("t", (spout, split, count))
        self._packing = round_robin(self._topo, 2)

    def status(self) -> dict[str, Any]:
        return {**super().status(), "stmgr_metrics": {"0": {"in_backpressure": False}}}


def _cell(row: int, col: str) -> str:
    return f"document.querySelectorAll('#health-steps tbody tr')[{row}].querySelector('td[data-col=\"{col}\"]')"


async def _session(chromium: str, tmp_path: Path, logs: Path) -> None:
    srv = await serve_http(Api(Master(), logs=logs), "127.0.0.1")
    b = Browser(chromium, tmp_path / "profile")
    try:
        await b.connect()
        await b.call("Page.enable")
        await b.call("Page.navigate", url=f"http://127.0.0.1:{srv.port}/")
        await b.wait("document.getElementById('health-none')?.hidden === false", 30, "the panel's word that none ran")
        assert await b.eval("document.getElementById('health-none').textContent") == NOT_RUNNING
        assert await b.eval("document.getElementById('health-steps').hidden") is True
        await b.screenshot(tmp_path / "0-not-running.png")

        steps = await asyncio.to_thread(four_steps, logs / LOG_FILE)
        await b.wait("document.querySelectorAll('#health-steps tbody tr').length === 4", 20, "the four steps")
        assert await b.eval("document.getElementById('health-none').hidden") is True
        times = await b.eval("[...document.querySelectorAll('#health-steps tbody tr')]"
                             ".map(r => Number(r.querySelector('td[data-col=\"time\"]').dataset.value))")
        assert times == [s["time"] for s in reversed(steps)]  # newest first
        # the newest: it could not observe, and says why
        assert await b.eval(_cell(0, "action") + ".innerText") == f"no observation\n{UNREACHABLE}"
        # the cooldown: no action and why, the diagnosis with its explanation on hover
        assert await b.eval(_cell(1, "action") + ".querySelector('.what').textContent") == "none"
        assert await b.eval(_cell(1, "action") + ".querySelector('.why').textContent") == steps[2]["action"]["why"]
        assert await b.eval(_cell(1, "diagnoses") + ".textContent") == "count: under-provisioned"
        assert await b.eval(_cell(1, "diagnoses") + ".querySelector('.diag').title") == \
            steps[2]["diagnoses"][0]["explanation"]
        # in the plan's order (the record sorts them by name)
        assert await b.eval(_cell(1, "running") + ".textContent") == "sentences 1, split 1, count 2"
        # the scale done, and the same scale failed before it
        assert await b.eval(_cell(2, "action") + ".querySelector('.what').textContent") == "scale count 1 → 2"
        assert await b.eval(_cell(2, "outcome") + ".textContent") == "done: updated: count -> 2"
        assert await b.eval(_cell(3, "outcome") + ".textContent") == f"FAILED: {UPDATE_FAILED}"
        await b.eval("document.getElementById('health').scrollIntoView(); true")
        await b.screenshot(tmp_path / "1-steps.png")
    finally:
        await b.close()
        await srv.close()


def test_the_health_manager_panel_in_chromium(tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.fail("chromium is missing: apt-get install -y chromium (scripts/setup.sh does)")
    logs = tmp_path / "logs"
    logs.mkdir()
    asyncio.run(_session(chromium, tmp_path, logs))
    print(f"\nscreenshots: {sorted(str(p) for p in tmp_path.glob('*.png'))}")
