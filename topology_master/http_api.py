"""The topology master's HTTP API (JSON, shaped like Heron's tracker) and its web page.

    GET /topologies                       {"local": {"default": [name]}}
    GET /topologies/logicalplan           spouts and bolts with their streams and inputs
    GET /topologies/physicalplan          stream managers, metrics managers, instances
    GET /topologies/metrics?component=C[&metricname=M...][&interval=SECONDS]
                                          per task: the value now, or its increase over the
                                          last SECONDS for counters; C = __stmgr__: the
                                          stream managers' backpressure times, per container
    GET /topologies/metrics/timeline?component=C&metricname=M[&starttime=T&endtime=T]
    GET /topologies/exceptions[?component=C]   the last tracebacks per task, with counts
    GET /topologies/execution_state
    GET /                                 the web page (topology_master/web/)

and the page's own endpoints (windows, tasks, logs, actions): ui_api.py.

Every JSON answer is wrapped as Heron's tracker wraps it: {"status": "success" | "failure",
"executiontime": seconds, "message": "...", "version": ..., "result": ...}. A ``topology``
query parameter naming another topology is a 404. This module is pure (no sockets): the
transport is http_server.py (aiohttp), which also enforces the limits on requests.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from heron_py.common.container_layout import TopologyPaths
from heron_py.common.metric_names import STMGR_COMPONENT as STMGR
from heron_py.common.metric_names import is_counter
from topology_master.metrics_windows import MetricsWindows, fanout_of
from topology_master.ui_api import ENDPOINTS, UiError, UiRoutes

VERSION = "heron-py 0.1"
WEB = Path(__file__).resolve().parent / "web"
MAX_HEAD = 8192  # bytes of request line, and of any header line
TIMELINE_POINTS = 720
_TYPES = {".html": "text/html; charset=utf-8", ".js": "application/javascript", ".css": "text/css",
          ".txt": "text/plain; charset=utf-8", ".svg": "image/svg+xml"}
# the stream managers' series (component STMGR, the name the metrics managers label them with):
# keyed by container where a component's are keyed by task. Only their backpressure times are kept (what
# the health manager, heron-py autoscale, reads): the rest of a stream manager's report grows
# with its connections and is the metrics managers' to serve (Prometheus). All are counters
STMGR_KEPT = ("__time_spent_back_pressure_ms", "__time_spent_back_pressure_by_compid/")


class HttpError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class MetricsView:
    """What the master knows of metrics, pure: the latest reports of each container's metrics
    manager, a timeline per (component, task, metric), and the exceptions. The stream managers'
    backpressure times have timelines too, as component ``STMGR`` with the container for task."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.latest: dict[int, dict[str, Any]] = {}  # container -> metrics manager's last report
        self.timeline: dict[tuple[str, str, str], deque[tuple[float, float]]] = {}
        self.clock = clock
        self.windows: MetricsWindows | None = None  # set once the topology is known (Api)
        self.newest = 0.0  # the time of the newest report kept: where an interval ends

    def update(self, doc: dict[str, Any]) -> None:
        container = int(doc.get("container", -1))
        self.latest[container] = doc
        for rep in doc.get("reports", []):
            if rep.get("kind") == "stmgr":
                self._stmgr(rep)
            if rep.get("kind") != "instance":
                continue
            if self.windows is not None:
                self.windows.observe(rep)
            comp, task, t = str(rep.get("component")), str(rep.get("task")), float(rep.get("time", 0.0))
            for section in ("counters", "gauges"):
                for name, v in rep.get(section, {}).items():
                    if isinstance(v, (int, float)):
                        self._add((comp, task, name), t, v)
            for name, v in rep.get("user", {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    self._add((comp, task, f"user/{name}"), t, v)

    def _stmgr(self, rep: dict[str, Any]) -> None:
        container, t = str(rep.get("container")), float(rep.get("time", 0.0))
        for name, v in rep.get("counters", {}).items():
            if name.startswith(STMGR_KEPT) and isinstance(v, (int, float)) and not isinstance(v, bool):
                self._add((STMGR, container, name), t, v)

    def _add(self, key: tuple[str, str, str], t: float, v: float) -> None:
        line = self.timeline.setdefault(key, deque(maxlen=TIMELINE_POINTS))
        if not line or line[-1][0] < t:
            line.append((t, float(v)))
            self.newest = max(self.newest, t)

    def metric_names(self, component: str) -> list[str]:
        return sorted({n for (c, _, n) in self.timeline if c == component})

    def metrics(self, component: str, names: list[str], interval: float) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        # the interval ends at the newest report, not now: reports reach the master a forwarding
        # interval late or more, and an interval ending now would hold that much less than its
        # length (a 4 s window of 1 s reports held 3 s of counts). A task whose reports stopped
        # still reads no increase
        end = min(self.clock(), self.newest) if self.newest > 0 else self.clock()
        for (c, task, n), line in self.timeline.items():
            if c != component or (names and n not in names) or not line:
                continue
            value = line[-1][1]
            if interval > 0 and (c == STMGR or is_counter(n)):
                # the increase over the interval: last value minus the last one before the window
                before = [v for (t, v) in line if t <= end - interval]
                value = value - (before[-1] if before else line[0][1])
            out.setdefault(n, {})[task] = value
        return out

    def series(self, component: str, names: list[str], start: float,
               end: float) -> dict[str, dict[str, dict[str, float]]]:
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (c, task, n), line in self.timeline.items():
            if c != component or n not in names:
                continue
            out.setdefault(n, {})[task] = {f"{t:.3f}": v for (t, v) in line if start <= t <= end}
        return out

    def exceptions(self, component: str | None) -> list[dict[str, Any]]:
        out = []
        for doc in self.latest.values():
            for e in doc.get("exceptions", []):
                if component is None or e.get("component") == component:
                    out.append({**e, "container": doc.get("container")})
        return sorted(out, key=lambda e: (e.get("task", 0), e.get("firsttime", 0)))

    def endpoints(self) -> dict[str, dict[str, Any]]:
        return {str(c): {"host": d.get("host"), "http_port": d.get("http_port"),
                         "http_scheme": d.get("http_scheme", "http")}
                for c, d in sorted(self.latest.items())}


class Api:
    """Routes GET requests to JSON results. ``tm`` is the TopologyMaster (duck-typed)."""

    def __init__(self, tm: Any, logs: Path | None = None) -> None:
        self.tm = tm
        kinds = {c.name: c.kind.value for c in tm._topo.components}
        windows = MetricsWindows(kinds, fanout_of(tm._topo), clock=tm.metrics.clock)
        tm.metrics.windows = windows
        self.ui = UiRoutes(tm, windows, logs if logs is not None else TopologyPaths.of(tm.topology).logs)

    def handle(self, path: str, query: dict[str, list[str]], method: str = "GET",
               origin: str = "") -> tuple[int, str, bytes]:
        t0 = time.perf_counter()
        if method == "GET" and (path in ("/", "/index.html") or path.startswith("/static/")):
            return self._static(path)
        try:
            topo = query.get("topology", [self.tm.topology])[0]
            if topo != self.tm.topology:
                raise HttpError(404, f"topology '{topo}' is not managed by this topology master "
                                     f"(it manages '{self.tm.topology}')")
            handled, result = self.ui.route(method, path, query, origin)
            if not handled:
                result = self._route(path, query)
            status, code, message = "success", 200, ""
        except (HttpError, UiError) as e:
            result, status, code, message = None, "failure", e.code, str(e)
        body = json.dumps({"status": status, "executiontime": time.perf_counter() - t0, "message": message,
                           "version": VERSION, "result": result}, default=str).encode()
        return code, "application/json", body

    def _static(self, path: str) -> tuple[int, str, bytes]:
        name = "index.html" if path in ("/", "/index.html") else path[len("/static/"):]
        f = (WEB / name).resolve()
        if not f.is_relative_to(WEB) or not f.is_file():
            return 404, "text/plain", b"not found"
        return 200, _TYPES.get(f.suffix, "application/octet-stream"), f.read_bytes()

    def _route(self, path: str, q: dict[str, list[str]]) -> Any:
        tm = self.tm
        if path == "/topologies":
            return {"local": {"default": [tm.topology]}}
        if path == "/topologies/logicalplan":
            return logical_plan(tm._topo)
        if path == "/topologies/physicalplan":
            st = tm.status()
            spouts: dict[str, list[int]] = {}
            bolts: dict[str, list[int]] = {}
            kinds = {c.name: c.kind.value for c in tm._topo.components}
            for t in tm._packing.tasks:
                group = spouts if kinds[t.component] == "spout" else bolts
                group.setdefault(t.component, []).append(t.task_id)
            return {"stmgrs": st["stmgrs"], "instances": st["instances"], "spouts": spouts, "bolts": bolts,
                    "metricsmgrs": tm.metrics.endpoints(), "tmanager": st["tmanager"],
                    "pplan_version": st["pplan_version"]}
        if path == "/topologies/execution_state":
            return tm.status()
        if path == "/topologies/exceptions":
            comp = q.get("component", [None])[0]
            self._check_component(comp, required=False)
            return tm.metrics.exceptions(comp)
        if path == "/topologies/metrics":
            asked = q.get("component", [None])[0]
            comp = STMGR if asked == STMGR else self._check_component(asked, required=True)
            names = q.get("metricname", [])
            interval = _number(q, "interval", 0.0)
            return {"component": comp, "interval": interval, "metrics": tm.metrics.metrics(comp, names, interval),
                    "metricnames": tm.metrics.metric_names(comp)}
        if path == "/topologies/metrics/timeline":
            comp = self._check_component(q.get("component", [None])[0], required=True)
            names = q.get("metricname", [])
            if not names:
                raise HttpError(400, "/topologies/metrics/timeline: expected at least one metricname parameter, "
                                     "found none")
            now = time.time()
            start, end = _number(q, "starttime", now - 3600), _number(q, "endtime", now + 60)
            return {"component": comp, "starttime": start, "endtime": end,
                    "timeline": tm.metrics.series(comp, names, start, end)}
        raise HttpError(404, f"no endpoint {path}; expected one of /topologies, /topologies/logicalplan, "
                             "/topologies/physicalplan, /topologies/metrics, /topologies/metrics/timeline, "
                             "/topologies/exceptions, /topologies/execution_state, " + ", ".join(ENDPOINTS))

    def _check_component(self, comp: str | None, required: bool) -> str:
        names = [c.name for c in self.tm._topo.components]
        if comp is None:
            if required:
                raise HttpError(400, f"expected a component parameter (one of {', '.join(names)}), found none")
            return ""
        if comp not in names:
            raise HttpError(404, f"topology '{self.tm.topology}' has no component '{comp}'; expected one of "
                                 f"{', '.join(names)}")
        return comp


def _number(q: dict[str, list[str]], key: str, default: float) -> float:
    raw = q.get(key, [None])[0]
    if raw is None:
        return default
    try:
        return float(raw)
    except ValueError:
        raise HttpError(400, f"parameter {key}: expected a number, found {raw!r}") from None


def logical_plan(topo: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"spouts": {}, "bolts": {}}
    for c in topo.components:
        doc = {"par": c.par, "class": c.class_name,
               "outputs": [{"stream_name": s.name, "fields": list(s.fields)} for s in c.outputs],
               "inputs": [{"component_name": i.component, "stream_name": i.stream,
                           "grouping": i.grouping.kind.value.upper(),
                           "fields": list(i.grouping.fields)} for i in c.inputs]}
        out["spouts" if c.kind.value == "spout" else "bolts"][c.name] = doc
    return out
