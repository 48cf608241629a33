"""The web page's endpoints (topology_master/ui_api.py) through the pure router and through the
aiohttp transport: windows, task tables, chart series, logs with paging, and actions with
the topology's token; every error body verbatim."""

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from heron_py.planner.model import TopologyState
from tests.fakes import API_NOW, FakeApiMaster
from topology_master.http_api import Api
from topology_master.http_server import HttpServer, serve_http
from topology_master.ui_actions import Actions, check_action, cli_command

TOKEN = "ab" * 32


class Master(FakeApiMaster):
    """The fake master with a run state, stream managers and a metrics manager's restarts."""

    def __init__(self) -> None:
        super().__init__()
        self.state = TopologyState.RUNNING
        self.active = True
        self.cli_calls: list[tuple[str, int | None]] = []
        self.actions = Actions(self, "t", 2, logging.getLogger("test.ui"),
                               lambda a, k: self.cli_calls.append((a, k)))

    def set_run_state(self, state: TopologyState) -> str:
        self.state = state
        return f"topology 't' is now {state.value}"

    def status(self) -> dict[str, Any]:
        return {"topology": "t", "state": self.state.value, "pplan_version": 3, "tmanager": {"pid": 1},
                "stmgrs": {"0": {"host": "10.0.0.1", "port": 1}, "1": {"host": "10.0.0.2", "port": 2}},
                "instances": {"1": {"pid": 111, "ready": True}, "2": {"pid": 222, "ready": True}},
                "stmgr_metrics": {"1": {"in_backpressure": True}}}


def _report(t: float, emitted: int, executed: int) -> dict[str, Any]:
    return {"container": 0, "host": "h", "http_port": 99, "restarts": {"sink-2": 2},
            "reports": [
                {"kind": "instance", "component": "numbers", "task": 1, "time": t,
                 "counters": {"__emit-count/default": emitted, "__ack-count": emitted},
                 "gauges": {"__complete-latency-ms/p50": 5.0},
                 "process": {"cpu_seconds": t - API_NOW, "rss_bytes": 30e6}},
                {"kind": "instance", "component": "sink", "task": 2, "time": t,
                 "counters": {"__execute-count/numbers/default": executed}, "gauges": {"__execute-latency-ms": 2.0}}],
            "exceptions": [{"component": "sink", "task": 2, "stacktrace": "Traceback", "count": 1,
                            "lasttime": 4e9}]}  # "recent" whatever the wall clock says


@pytest.fixture
def master() -> Master:
    return Master()


@pytest.fixture
def api(master: Master, tmp_path: Path) -> Api:
    a = Api(master, logs=tmp_path)
    master.metrics.update(_report(API_NOW - 20, 1000, 0))
    master.metrics.update(_report(API_NOW - 10, 1500, 400))
    log = tmp_path / "container-1" / "sink-2.log"
    log.parent.mkdir()
    log.write_bytes(b"".join(b"line %04d\n" % i for i in range(1000)))  # 10 bytes a line
    return a


def _get(api: Api, path: str, method: str = "GET", **query: Any) -> tuple[int, dict[str, Any]]:
    code, ctype, body = api.handle(path, {k: [v] for k, v in query.items()}, method, "192.0.2.7")
    assert ctype == "application/json"
    return code, json.loads(body)


def test_component_summary_is_storm_uis(api: Api) -> None:
    code, doc = _get(api, "/topologies/componentsummary", window="600")
    assert code == 200
    comps = doc["result"]["components"]
    # the spout's first report counts from 0: its 1000 early emits are there
    assert comps["numbers"] == {"kind": "spout", "emitted": 1500, "transferred": 1500, "acked": 1500, "failed": 0,
                                "complete_latency_ms": 5.0, "tasks": 1, "backpressure": False,
                                "recent_exceptions": False}
    sink = comps["sink"]
    assert (sink["executed"], sink["execute_latency_ms"], sink["tasks"]) == (400, 2.0, 2)
    assert sink["capacity"] == pytest.approx(800 / 20_000, abs=1e-3)  # 800 ms busy over the 20 s observed
    # sink's task 3 is in container 1, whose stream manager is in backpressure
    assert sink["backpressure"] is True and sink["recent_exceptions"] is True
    assert _get(api, "/topologies/componentsummary", window="all")[1]["result"]["window"] == "all"


def test_task_table_has_placement_process_and_a_log_link(api: Api) -> None:
    _, doc = _get(api, "/topologies/tasks")
    tasks = doc["result"]["tasks"]
    assert sorted(tasks) == ["1", "2", "3"]
    t1 = tasks["1"]
    assert (t1["host"], t1["container"], t1["pid"], t1["running"], t1["restarts"]) == ("10.0.0.1", 0, 111, True, 0)
    assert (t1["emitted"], t1["rss_bytes"], t1["cpu_percent"]) == (1500, 30e6, 100.0)
    assert t1["uptime_s"] > 0 and t1["log"] == "/topologies/logs?task=1"
    assert tasks["2"]["restarts"] == 2 and tasks["3"]["uptime_s"] is None  # never reported


def test_series_for_charts(api: Api) -> None:
    _, doc = _get(api, "/topologies/series", component="numbers", metric="emitted")
    res = doc["result"]
    assert (res["unit"], res["bucket_s"], res["window"]) == ("tuples/s", 10.0, "600")
    assert sum(v * (t1 - t0) for t0, t1, v in res["points"]) == pytest.approx(1500)
    assert [p[:2] for p in res["points"]] == [[API_NOW - 21, API_NOW - 20], [API_NOW - 20, API_NOW - 10]]
    _, doc = _get(api, "/topologies/series", component="sink", metric="exec_ms", window="all")
    assert doc["result"]["unit"] == "ms" and doc["result"]["points"][-1][2] == 2.0


def test_log_tail_and_paging(api: Api, tmp_path: Path) -> None:
    _, doc = _get(api, "/topologies/logs", task="2", length="20")
    res = doc["result"]
    assert (res["size"], res["offset"], res["length"], res["data"]) == (10_000, 9980, 20, "line 0998\nline 0999\n")
    assert res["file"] == str(tmp_path / "container-1" / "sink-2.log") and res["component"] == "sink"
    _, doc = _get(api, "/topologies/logs", task="2", offset="10", length="10")
    assert (doc["result"]["data"], doc["result"]["next_offset"]) == ("line 0001\n", 20)
    _, doc = _get(api, "/topologies/logs", task="2", offset="20000")
    assert (doc["result"]["offset"], doc["result"]["data"]) == (10_000, "")  # past the end: nothing yet
    _, doc = _get(api, "/topologies/logs", task="2")
    assert doc["result"]["length"] == 10_000  # the default page (16 KiB) holds it all


@pytest.mark.parametrize(("path", "query", "code", "message"), [
    ("/topologies/logs", {"task": "9"}, 404, "topology 't' has no task '9'; expected a task id from 1 to 3"),
    ("/topologies/logs", {}, 400, "expected a task parameter (a task id from 1 to 3), found none"),
    ("/topologies/logs", {"task": "2", "offset": "-5"}, 400,
     "parameter offset: expected a whole number of bytes >= 0 (or no offset for the log's tail), found '-5'"),
    ("/topologies/logs", {"task": "2", "offset": "x"}, 400,
     "parameter offset: expected a whole number of bytes >= 0 (or no offset for the log's tail), found 'x'"),
    ("/topologies/logs", {"task": "2", "length": "70000"}, 400,
     "parameter length: expected a whole number of bytes from 1 to 65536, found '70000'"),
    ("/topologies/logs", {"task": "2", "length": "0"}, 400,
     "parameter length: expected a whole number of bytes from 1 to 65536, found '0'"),
    ("/topologies/componentsummary", {"window": "5"}, 400,
     "parameter window: expected one of 600, 10800, 86400, all (seconds, or all), found '5'"),
    ("/topologies/series", {"component": "x", "metric": "emitted"}, 404,
     "expected a component parameter (one of numbers, sink), found 'x'"),
    ("/topologies/series", {"component": "sink", "metric": "speed"}, 400,
     "parameter metric: expected one of emitted, transferred, acked, failed, executed, exec_ms, complete_ms, "
     "found 'speed'"),
])
def test_errors_verbatim(api: Api, path: str, query: dict[str, str], code: int, message: str) -> None:
    got, doc = _get(api, path, **query)
    assert (got, doc["status"], doc["message"], doc["result"]) == (code, "failure", message, None)


def test_missing_log_file_says_where(api: Api, tmp_path: Path) -> None:
    code, doc = _get(api, "/topologies/logs", task="1")
    assert (code, doc["message"]) == (404, f"no log at {tmp_path / 'container-0' / 'numbers-1.log'} on the "
                                           "topology master's host (on a cluster without a shared home, the "
                                           "container's host keeps it)")


def test_actions_change_state_and_are_logged_with_origin(api: Api, master: Master,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "test.ui")
    code, doc = _get(api, "/topologies/actions/deactivate", "POST")
    assert (code, doc["result"], master.state) == (200, {"message": "topology 't' is now PAUSED"},
                                                   TopologyState.PAUSED)
    _get(api, "/topologies/actions/activate", "POST")
    assert master.state is TopologyState.RUNNING
    code, doc = _get(api, "/topologies/actions/restart", "POST", container="1")
    assert code == 200 and master.cli_calls == [("restart", 1)]
    _get(api, "/topologies/actions/kill", "POST")
    assert master.cli_calls == [("restart", 1), ("kill", None)]
    code, doc = _get(api, "/topologies/actions/restart", "POST", container="7")
    assert (code, doc["message"]) == (400, "restart: expected a container parameter from 0 to 1, found '7'")
    code, doc = _get(api, "/topologies/actions/explode", "POST")
    assert (code, doc["message"]) == (404, "no action 'explode'; expected one of activate, deactivate, restart, kill")
    assert [r.getMessage() for r in caplog.records] == [
        "web action deactivate from 192.0.2.7", "web action activate from 192.0.2.7",
        "web action restart container 1 from 192.0.2.7", "web action kill from 192.0.2.7",
        "web action restart from 192.0.2.7 refused: restart: expected a container parameter from 0 to 1, found '7'",
        "web action explode from 192.0.2.7 refused: no action 'explode'; expected one of activate, deactivate, "
        "restart, kill"]
    master.active = False
    code, doc = _get(api, "/topologies/actions/kill", "POST")
    assert code == 409 and doc["message"].endswith("is a standby; open the active master's page (heron-py status "
                                                   "shows it)")


def test_pure_action_checks() -> None:
    assert check_action("restart", {"container": ["0"]}, 1) == 0
    assert check_action("kill", {}, 1) is None
    assert cli_command("kill", "local", "wc", None, ["--state-manager", "localfs"])[1:] == [
        "-m", "heron_py.cli.main", "kill", "local", "wc", "--state-manager", "localfs"]


# --- through aiohttp: the token, on loopback too ---

@pytest.fixture
async def server(api: Api) -> AsyncIterator[HttpServer]:
    srv = await serve_http(api, "127.0.0.1", action_token=TOKEN)
    yield srv
    await srv.close()


async def test_actions_need_the_token_even_on_loopback(server: HttpServer, master: Master,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://127.0.0.1:{server.port}/topologies/actions/deactivate"
    async with aiohttp.ClientSession() as s:
        async with s.post(url) as r:
            assert (r.status, await r.text()) == (401, (
                "an action needs the header 'Authorization: Bearer TOKEN' with the topology's admin token, on loopback "
                "too (heron-py status prints the page's address with it), found no Authorization header"))
            assert r.headers["WWW-Authenticate"] == "Bearer"
        async with s.post(url, headers={"Authorization": "Bearer nope"}) as r:
            assert r.status == 401 and (await r.text()).endswith("found a wrong token")
        assert master.state is TopologyState.RUNNING
        assert "web action deactivate from 127.0.0.1 refused: no Authorization header" in caplog.text
        async with s.post(url, headers={"Authorization": f"Bearer {TOKEN}"}) as r:
            assert r.status == 200 and (await r.json())["result"]["message"] == "topology 't' is now PAUSED"
        assert master.state is TopologyState.PAUSED
        # reads stay open on loopback; POST elsewhere is still a 405
        async with s.get(f"http://127.0.0.1:{server.port}/topologies/logs?task=2&length=10") as r:
            assert r.status == 200 and (await r.json())["result"]["data"] == "line 0999\n"
        async with s.post(f"http://127.0.0.1:{server.port}/topologies/tasks") as r:
            assert (r.status, await r.text()) == (405, "method 'POST' not allowed; expected GET")


async def test_no_action_token_means_no_actions(api: Api, master: Master) -> None:
    srv = await serve_http(api, "127.0.0.1")
    try:
        async with aiohttp.ClientSession() as s, s.post(
                f"http://127.0.0.1:{srv.port}/topologies/actions/kill", headers={"Authorization": "Bearer x"}) as r:
            assert r.status == 401
        assert master.cli_calls == []
    finally:
        await srv.close()
