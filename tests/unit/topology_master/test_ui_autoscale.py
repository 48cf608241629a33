"""``GET /topologies/autoscale[?last=N]`` (topology_master/ui_api.py): the health manager's last
steps, as ``heron-py autoscale`` recorded them in the topology's logs folder, through the pure
router and through the aiohttp transport; every error body verbatim."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from heron_py.cli.autoscale_log import LOG_FILE
from tests.fakes import FakeApiMaster
from tests.unit.autoscale_steps import UNREACHABLE, four_steps
from topology_master.http_api import Api
from topology_master.http_server import serve_http


def _get(api: Api, **query: str) -> tuple[int, dict[str, Any]]:
    code, ctype, body = api.handle("/topologies/autoscale", {k: [v] for k, v in query.items()}, "GET", "192.0.2.7")
    assert ctype == "application/json"
    return code, json.loads(body)


def test_no_record_is_no_step(tmp_path: Path) -> None:
    code, doc = _get(Api(FakeApiMaster(), logs=tmp_path))
    assert (code, doc["status"], doc["result"]) == (
        200, "success", {"last": 20, "file": str(tmp_path / LOG_FILE), "steps": []})


def test_the_last_steps_oldest_first_as_recorded(tmp_path: Path) -> None:
    steps = four_steps(tmp_path / LOG_FILE)
    api = Api(FakeApiMaster(), logs=tmp_path)
    _, doc = _get(api)
    assert doc["result"]["steps"] == steps  # every field of each step, as heron-py autoscale wrote it
    assert [(s["decision"], (s.get("outcome") or {}).get("ok")) for s in doc["result"]["steps"]] == [
        ("scale", False), ("scale", True), ("none", None), ("no observation", None)]
    _, doc = _get(api, last="2")
    assert doc["result"]["last"] == 2
    assert [s["decision"] for s in doc["result"]["steps"]] == ["none", "no observation"]
    assert doc["result"]["steps"][1]["error"] == UNREACHABLE


def test_a_line_that_is_not_a_step_is_skipped(tmp_path: Path) -> None:
    record = tmp_path / LOG_FILE
    four_steps(record)
    with record.open("ab") as f:
        f.write(b"{not json\n[1, 2]\n")
    # the last 3 steps, although the last 3 lines are not
    _, doc = _get(Api(FakeApiMaster(), logs=tmp_path), last="3")
    assert [s["decision"] for s in doc["result"]["steps"]] == ["scale", "none", "no observation"]
    _, doc = _get(Api(FakeApiMaster(), logs=tmp_path), last="500")
    assert len(doc["result"]["steps"]) == 4


@pytest.mark.parametrize("raw", ["0", "501", "-1", "x", "", "2.5", "1e3", "٣"])
def test_a_bad_count_is_a_400_in_one_line(tmp_path: Path, raw: str) -> None:
    code, doc = _get(Api(FakeApiMaster(), logs=tmp_path), last=raw)
    assert (code, doc["status"], doc["message"], doc["result"]) == (
        400, "failure", f"parameter last: expected a whole number of steps from 1 to 500, found {raw!r}", None)


async def test_through_the_transport(tmp_path: Path) -> None:
    four_steps(tmp_path / LOG_FILE)
    srv = await serve_http(Api(FakeApiMaster(), logs=tmp_path), "127.0.0.1")
    try:
        base = f"http://127.0.0.1:{srv.port}/topologies/autoscale"
        async with aiohttp.ClientSession() as s:
            async with s.get(base + "?last=1") as r:
                doc = await r.json()
                assert (r.status, [x["decision"] for x in doc["result"]["steps"]]) == (200, ["no observation"])
            async with s.get(base + "?last=many") as r:
                assert (r.status, (await r.json())["message"]) == (
                    400, "parameter last: expected a whole number of steps from 1 to 500, found 'many'")
    finally:
        await srv.close()
