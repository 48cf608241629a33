"""The topology master's HTTP API: the pure router against a small fake master (tests/fakes.py
``FakeApiMaster``), and the aiohttp transport on 127.0.0.1 against hostile and odd clients (raw
sockets, so every byte of the answer is the server's)."""

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp.http_exceptions import BadHttpMessage, BadStatusLine, LineTooLong

from tests.fakes import API_NOW, FakeApiMaster
from topology_master.http_api import Api
from topology_master.http_server import HttpServer, parse_error_answer, serve_http


def _report(t: float, emitted: int, latency: float) -> dict[str, Any]:
    return {"container": 0, "host": "h", "http_port": 99,
            "reports": [{"kind": "instance", "component": "numbers", "task": 1, "time": t,
                         "counters": {"__emit-count/default": emitted},
                         "gauges": {"__latency": latency}, "user": {"mean": 2.5, "flag": True}}],
            "exceptions": [{"component": "sink", "task": 2, "stacktrace": "Traceback", "count": 1}]}


@pytest.fixture
def master() -> FakeApiMaster:
    tm = FakeApiMaster()
    for i, t in enumerate((API_NOW - 120, API_NOW - 50, API_NOW - 5)):
        tm.metrics.update(_report(t, 100 * (i + 1), float(i)))
    return tm


def _get(api: Api, path: str, **query: Any) -> tuple[int, dict[str, Any]]:
    code, ctype, body = api.handle(path, {k: v if isinstance(v, list) else [v] for k, v in query.items()})
    assert ctype == "application/json"
    return code, json.loads(body)


# --- the pure router ---

def test_every_answer_is_wrapped_like_herons_tracker(master: FakeApiMaster) -> None:
    code, doc = _get(Api(master), "/topologies")
    assert code == 200
    assert doc == {"status": "success", "executiontime": pytest.approx(0, abs=1), "message": "",
                   "version": "heron-py 0.1", "result": {"local": {"default": ["t"]}}}


def test_plans_and_execution_state(master: FakeApiMaster) -> None:
    api = Api(master)
    _, doc = _get(api, "/topologies/logicalplan")
    assert doc["result"]["spouts"]["numbers"]["outputs"] == [{"stream_name": "default", "fields": ["n"]}]
    assert doc["result"]["bolts"]["sink"]["inputs"] == [
        {"component_name": "numbers", "stream_name": "default", "grouping": "FIELDS", "fields": ["n"]}]
    _, doc = _get(api, "/topologies/physicalplan")
    pp = doc["result"]
    assert (pp["spouts"], pp["bolts"]) == ({"numbers": [1]}, {"sink": [2, 3]})
    assert pp["metricsmgrs"] == {"0": {"host": "h", "http_port": 99, "http_scheme": "http"}}
    assert pp["pplan_version"] == 3
    assert _get(api, "/topologies/execution_state")[1]["result"] == master.status()


def test_metrics_now_and_over_an_interval(master: FakeApiMaster) -> None:
    api = Api(master)
    _, doc = _get(api, "/topologies/metrics", component="numbers")
    res = doc["result"]
    assert res["metrics"]["__emit-count/default"] == {"1": 300.0}
    assert res["metricnames"] == ["__emit-count/default", "__latency", "user/mean"]  # booleans are no metric
    # a counter's increase over the last 60 s: 300 now minus 100, the last value before the window
    _, doc = _get(api, "/topologies/metrics", component="numbers", interval="60",
                  metricname=["__emit-count/default", "__latency"])
    assert doc["result"]["metrics"] == {"__emit-count/default": {"1": 200.0}, "__latency": {"1": 2.0}}
    _, doc = _get(api, "/topologies/metrics/timeline", component="numbers", metricname="__latency",
                  starttime=str(API_NOW - 60), endtime=str(API_NOW))
    assert doc["result"]["timeline"] == {"__latency": {"1": {f"{API_NOW - 50:.3f}": 1.0, f"{API_NOW - 5:.3f}": 2.0}}}


def _stmgr_report(t: float, container: int, held_ms: int, by_sink_ms: int) -> dict[str, Any]:
    return {"container": container, "host": "h", "http_port": 99,
            "reports": [{"kind": "stmgr", "container": container, "time": t,
                         "counters": {"__time_spent_back_pressure_ms": held_ms,
                                      "__time_spent_back_pressure_by_compid/sink": by_sink_ms,
                                      "__bytes-out/task 2": 10 * held_ms, "__dropped-tuples/unknown": 0},
                         "gauges": {"__in-backpressure": 1}}]}


def test_stream_managers_backpressure_times_per_container(master: FakeApiMaster) -> None:
    """The health manager (heron-py autoscale) reads each stream manager's time in backpressure,
    and what was behind it, over its window: component __stmgr__, keyed by container, both
    read as counters; the rest of a stream manager's report is not kept."""
    for container, base in ((0, 0), (1, 5000)):
        for i, t in enumerate((API_NOW - 120, API_NOW - 50, API_NOW - 5)):
            master.metrics.update(_stmgr_report(t, container, base + 1000 * i * i, 700 * i))
    api = Api(master)
    _, doc = _get(api, "/topologies/metrics", component="__stmgr__", interval="60")
    assert doc["result"] == {
        "component": "__stmgr__", "interval": 60.0,
        # the value now less the one at API_NOW - 120, the last before the window
        "metrics": {"__time_spent_back_pressure_ms": {"0": 4000.0, "1": 4000.0},
                    "__time_spent_back_pressure_by_compid/sink": {"0": 1400.0, "1": 1400.0}},
        "metricnames": ["__time_spent_back_pressure_by_compid/sink", "__time_spent_back_pressure_ms"]}
    _, doc = _get(api, "/topologies/metrics", component="__stmgr__")
    assert doc["result"]["metrics"]["__time_spent_back_pressure_ms"] == {"0": 4000.0, "1": 9000.0}
    # the components' answers are what they were without the stream managers' reports
    _, doc = _get(api, "/topologies/metrics", component="numbers", interval="60")
    assert doc["result"]["metrics"]["__emit-count/default"] == {"1": 200.0}
    assert doc["result"]["metricnames"] == ["__emit-count/default", "__latency", "user/mean"]
    assert _get(api, "/topologies/metrics", component="sink")[1]["result"]["metrics"] == {}


def test_a_stream_managers_report_out_of_order_or_odd_is_not_kept(master: FakeApiMaster) -> None:
    master.metrics.update(_stmgr_report(API_NOW - 5, 0, 4000, 0))
    master.metrics.update(_stmgr_report(API_NOW - 50, 0, 1000, 0))  # older than the last one kept
    odd = _stmgr_report(API_NOW - 1, 0, 0, 0)
    odd["reports"][0]["counters"] = {"__time_spent_back_pressure_ms": True,
                                     "__time_spent_back_pressure_by_compid/sink": "soon"}
    master.metrics.update(odd)
    _, doc = _get(Api(master), "/topologies/metrics", component="__stmgr__")
    assert doc["result"]["metrics"] == {"__time_spent_back_pressure_ms": {"0": 4000.0},
                                        "__time_spent_back_pressure_by_compid/sink": {"0": 0.0}}


def test_an_interval_ends_at_the_newest_report_not_at_the_masters_clock() -> None:
    """Reports reach the master a forwarding interval late: a 4 s interval ending at the clock
    would hold 3 s of 1 s reports. It ends at the newest report the master has (from any task),
    so it holds 4 s of counts; a task whose reports stopped reads no increase."""
    tm = FakeApiMaster()
    for i in range(8):  # one report a second, the last 1.5 s before the clock
        t = API_NOW - 8.5 + i
        tasks = (2, 3) if i < 3 else (2,)
        tm.metrics.update({"container": 0, "reports": [
            {"kind": "instance", "component": "sink", "task": task, "time": t,
             "counters": {"__emit-count/default": 10 * i}} for task in tasks]})
    _, doc = _get(Api(tm), "/topologies/metrics", component="sink", interval="4")
    assert doc["result"]["metrics"] == {"__emit-count/default": {"2": 40.0, "3": 0.0}}


def test_exceptions_by_component(master: FakeApiMaster) -> None:
    api = Api(master)
    assert _get(api, "/topologies/exceptions")[1]["result"] == [
        {"component": "sink", "task": 2, "stacktrace": "Traceback", "count": 1, "container": 0}]
    assert _get(api, "/topologies/exceptions", component="numbers")[1]["result"] == []


@pytest.mark.parametrize(("path", "query", "code", "message"), [
    ("/topologies", {"topology": "other"}, 404,
     "topology 'other' is not managed by this topology master (it manages 't')"),
    ("/nope", {}, 404, "no endpoint /nope; expected one of /topologies, /topologies/logicalplan, "
     "/topologies/physicalplan, /topologies/metrics, /topologies/metrics/timeline, /topologies/exceptions, "
     "/topologies/execution_state, /topologies/componentsummary, /topologies/tasks, /topologies/series, "
     "/topologies/logs, /topologies/autoscale, /topologies/actions/ACTION (POST)"),
    ("/topologies/metrics", {}, 400, "expected a component parameter (one of numbers, sink), found none"),
    ("/topologies/metrics", {"component": "x"}, 404,
     "topology 't' has no component 'x'; expected one of numbers, sink"),
    ("/topologies/exceptions", {"component": "x"}, 404,
     "topology 't' has no component 'x'; expected one of numbers, sink"),
    ("/topologies/metrics", {"component": "sink", "interval": "soon"}, 400,
     "parameter interval: expected a number, found 'soon'"),
    ("/topologies/metrics/timeline", {"component": "sink"}, 400,
     "/topologies/metrics/timeline: expected at least one metricname parameter, found none"),
])
def test_errors_are_one_clear_message(master: FakeApiMaster, path: str, query: dict[str, str], code: int,
                                      message: str) -> None:
    got, doc = _get(Api(master), path, **query)
    assert (got, doc["status"], doc["message"], doc["result"]) == (code, "failure", message, None)


def test_web_page_and_no_escape_from_its_folder(master: FakeApiMaster) -> None:
    api = Api(master)
    code, ctype, body = api.handle("/", {})
    assert (code, ctype) == (200, "text/html; charset=utf-8") and b"<html" in body.lower()
    assert api.handle("/static/app.js", {})[:2] == (200, "application/javascript")
    assert api.handle("/static/../http_api.py", {}) == (404, "text/plain", b"not found")
    assert api.handle("/static/missing.css", {}) == (404, "text/plain", b"not found")


def test_parse_errors_map_to_our_answers() -> None:
    assert parse_error_answer(LineTooLong(b"aaa", 8192)) == (431, "request head longer than 8192 bytes")
    assert parse_error_answer(BadHttpMessage("Too many headers received")) == (
        431, "request head has more than 32 header lines")
    # llhttp quotes the line in its message; the pure-Python parser keeps it
    assert parse_error_answer(BadStatusLine("", "Invalid method encountered:\n\n  b'GARBAGE'\n     ^")) == (
        400, "expected a request line 'GET /path HTTP/1.1', found 'GARBAGE'")
    assert parse_error_answer(BadStatusLine("FOO / HTTP/9")) == (
        400, "expected a request line 'GET /path HTTP/1.1', found 'FOO / HTTP/9'")
    assert parse_error_answer(BadHttpMessage("Missing 'Host' header in request.")) == (
        400, "bad request: Missing 'Host' header in request.")


# --- the aiohttp server, with raw sockets ---

@pytest.fixture
async def server(master: FakeApiMaster) -> AsyncIterator[HttpServer]:
    srv = await serve_http(Api(master), "127.0.0.1", head_timeout=0.5)
    yield srv
    await srv.close()


async def _read_response(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    status, *lines = head.decode("latin-1").split("\r\n")[:-2]
    headers = {k.lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines)}
    body = await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), 5)
    return status, headers, body


async def _exchange(port: int, raw: bytes) -> tuple[str, dict[str, str], bytes, bytes]:
    """Sends ``raw``, reads one answer, then what follows it until the server closes."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        status, headers, body = await _read_response(reader)
        rest = await asyncio.wait_for(reader.read(), 5)
        return status, headers, body, rest
    finally:
        writer.close()


async def test_get_answers_json(server: HttpServer) -> None:
    status, headers, body, _ = await _exchange(
        server.port, b"GET /topologies?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert status == "HTTP/1.1 200 OK"
    assert (headers["content-type"], headers["cache-control"]) == ("application/json", "no-store")
    assert json.loads(body)["result"] == {"local": {"default": ["t"]}}


async def test_json_errors_keep_their_status(server: HttpServer) -> None:
    status, _, body, _ = await _exchange(
        server.port, b"GET /topologies/metrics?component=x HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    assert status == "HTTP/1.1 404 Not Found"
    assert json.loads(body)["message"] == "topology 't' has no component 'x'; expected one of numbers, sink"


async def test_oversize_request_line_is_431(server: HttpServer) -> None:
    status, headers, body, rest = await _exchange(server.port, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n")
    assert status == "HTTP/1.1 431 Request Header Fields Too Large"
    assert headers["content-type"] == "text/plain; charset=utf-8" and headers["connection"] == "close"
    assert (body, rest) == (b"request head longer than 8192 bytes", b"")


async def test_oversize_header_line_and_too_many_headers_are_431(server: HttpServer) -> None:
    status, _, body, _ = await _exchange(server.port,
                                         b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n")
    assert (status, body) == ("HTTP/1.1 431 Request Header Fields Too Large", b"request head longer than 8192 bytes")
    many = b"".join(b"X-%d: 1\r\n" % i for i in range(40))
    status, _, body, _ = await _exchange(server.port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + many + b"\r\n")
    assert (status, body) == ("HTTP/1.1 431 Request Header Fields Too Large",
                              b"request head has more than 32 header lines")


async def test_post_is_405(server: HttpServer) -> None:
    status, _, body, _ = await _exchange(
        server.port, b"POST /topologies HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx")
    assert (status, body) == ("HTTP/1.1 405 Method Not Allowed", b"method 'POST' not allowed; expected GET")


async def test_malformed_request_line_is_400(server: HttpServer) -> None:
    status, _, body, rest = await _exchange(server.port, b"GARBAGE\r\n\r\n")
    assert (status, body, rest) == (
        "HTTP/1.1 400 Bad Request", b"expected a request line 'GET /path HTTP/1.1', found 'GARBAGE'", b"")
    status, _, body, _ = await _exchange(server.port, b"GET / HTTP/1.1 extra\r\n\r\n")
    assert (status, body) == (
        "HTTP/1.1 400 Bad Request", b"expected a request line 'GET /path HTTP/1.1', found 'GET / HTTP/1.1 extra'")


async def test_two_requests_on_one_keep_alive_connection(server: HttpServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"GET /topologies HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, headers, body = await _read_response(reader)
        assert status == "HTTP/1.1 200 OK" and "connection" not in headers  # HTTP/1.1: kept alive
        assert json.loads(body)["result"] == {"local": {"default": ["t"]}}
        writer.write(b"GET /topologies/metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        status, _, body = await _read_response(reader)
        assert status == "HTTP/1.1 400 Bad Request"
        assert json.loads(body)["message"] == "expected a component parameter (one of numbers, sink), found none"
    finally:
        writer.close()


async def test_a_slow_client_is_dropped_without_an_answer(server: HttpServer) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"GET /topologies HTTP/1.1\r\nHo")  # half a head, then nothing
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        assert await asyncio.wait_for(reader.read(), 5) == b""  # closed, no answer
        assert 0.3 < loop.time() - t0 < 3  # by the head timeout (0.5 s here), not by the test's
    finally:
        writer.close()


async def test_close_stops_listening(master: FakeApiMaster) -> None:
    srv = await serve_http(Api(master), "127.0.0.1")
    await srv.close()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", srv.port)
