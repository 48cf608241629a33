"""The web page's endpoints, beside the tracker-shaped ones of http_api.py (pure: no sockets).

    GET  /topologies/componentsummary?window=W   per spout and bolt, Storm UI's numbers
    GET  /topologies/tasks?window=W              per task: placement, process and the numbers
                                                 (a KafkaSpout task's also kafka_lag: partition → lag)
    GET  /topologies/series?component=C&metric=M[&window=W]   [[time, value]] for a chart
    GET  /topologies/logs?task=T[&offset=B][&length=N]         one page of a task's log
    GET  /topologies/autoscale[?last=N]          the health manager's last N steps (default 20)
    POST /topologies/actions/A[?container=K]     activate, deactivate, restart, kill

W is 600, 10800, 86400 (seconds) or all; the default is 600. The series are per second for
counts (emitted, transferred, acked, failed, executed) and milliseconds for the latencies
(exec_ms, complete_ms): one [from, to, value] per bucket of the window.

The health manager's steps are the lines ``heron-py autoscale`` appends to ``autoscale.jsonl`` in
the topology's logs folder (heron_py/cli/autoscale_log.py writes them), oldest first: empty while
it has written none (not run, or run from a host whose heron home is not this one's).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from heron_py.common.autoscale_record import LOG_FILE, last_steps
from topology_master.metrics_windows import WINDOWS, MetricsWindows, WindowError
from topology_master.ui_actions import ActionError, Actions
from topology_master.ui_logs import LogError, parse_paging, read_page

SERIES = ("emitted", "transferred", "acked", "failed", "executed", "exec_ms", "complete_ms")
ENDPOINTS = ("/topologies/componentsummary", "/topologies/tasks", "/topologies/series", "/topologies/logs",
             "/topologies/autoscale", "/topologies/actions/ACTION (POST)")
# an exception younger than this marks its component on the graph
RECENT_EXCEPTION_S = 600.0
# the health manager's steps an answer holds: by default what the page shows, at most a few MB
STEPS_DEFAULT, STEPS_MAX = 20, 500


# the KafkaSpout's metric (heron_py/connectors/kafka/spout.py) and its per-partition lag keys
KAFKA_METRIC = "kafka"
LAG_SUFFIX = "/lag"


def kafka_lag(reports: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, float]]:
    """Task → {"TOPIC-P": lag} from the latest instance reports that carry the KafkaSpout's
    metric: the high watermark of the partition's last fetch minus its committed offset."""
    out: dict[int, dict[str, float]] = {}
    for rep in reports:
        values = rep.get("user", {}).get(KAFKA_METRIC) if rep.get("kind") == "instance" else None
        if not isinstance(values, dict):
            continue
        lags = {k[:-len(LAG_SUFFIX)]: float(v) for k, v in values.items()
                if k.endswith(LAG_SUFFIX) and isinstance(v, (int, float)) and not isinstance(v, bool)}
        if lags:
            out[int(rep.get("task", -1))] = dict(sorted(lags.items()))
    return out


class UiError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class UiRoutes:
    """``tm`` is the master (duck-typed: topology, _topo, _packing, status(), metrics, actions);
    ``logs`` the topology's log folder."""

    def __init__(self, tm: Any, windows: MetricsWindows, logs: Path) -> None:
        self.tm, self.windows, self.logs = tm, windows, logs

    def route(self, method: str, path: str, q: Mapping[str, list[str]], origin: str) -> tuple[bool, Any]:
        """(handled, result); UiError for a request that is wrong."""
        try:
            if method == "POST" and path.startswith("/topologies/actions/"):
                actions: Actions | None = getattr(self.tm, "actions", None)
                if actions is None:
                    raise UiError(503, "actions are not available on this topology master")
                return True, {"message": actions.run(path.rsplit("/", 1)[1], q, origin)}
            if method != "GET":
                return False, None
            if path == "/topologies/componentsummary":
                return True, self.components(_window(q))
            if path == "/topologies/tasks":
                return True, self.tasks(_window(q))
            if path == "/topologies/series":
                return True, self.series(q)
            if path == "/topologies/logs":
                return True, self.log(q)
            if path == "/topologies/autoscale":
                return True, self.autoscale(q.get("last", [None])[0])
        except (WindowError, ValueError) as e:
            raise UiError(400, str(e)) from None
        except (LogError, ActionError) as e:
            raise UiError(e.code, str(e)) from None
        return False, None

    def components(self, window: str) -> dict[str, Any]:
        rows = self.windows.component_rows(window)
        es = self.tm.status()
        bp_containers = {int(c) for c, m in es.get("stmgr_metrics", {}).items() if m.get("in_backpressure")}
        now = time.time()
        recent = {e.get("component") for e in self.tm.metrics.exceptions(None)
                  if now - float(e.get("lasttime", 0) or 0) < RECENT_EXCEPTION_S}
        for t in self.tm._packing.tasks:
            row = rows.get(t.component)
            if row is not None:
                row["tasks"] = row.get("tasks", 0) + 1
                # Heron's stream manager knows which of its connections is over its mark, not
                # which component: a component is marked when a container of its tasks is
                row["backpressure"] = row.get("backpressure", False) or t.container in bp_containers
        for comp, row in rows.items():
            row["recent_exceptions"] = comp in recent
        return {"window": window, "state": es.get("state"), "components": rows}

    def tasks(self, window: str) -> dict[str, Any]:
        es = self.tm.status()
        rows = self.windows.task_rows(window)
        restarts: dict[str, int] = {}
        for doc in self.tm.metrics.latest.values():
            restarts.update({str(k): int(v) for k, v in dict(doc.get("restarts", {})).items()})
        lag = kafka_lag(r for doc in self.tm.metrics.latest.values() for r in doc.get("reports", []))
        now = time.time()
        out = {}
        for t in sorted(self.tm._packing.tasks, key=lambda t: t.task_id):
            inst = es.get("instances", {}).get(str(t.task_id), {})
            sm = es.get("stmgrs", {}).get(str(t.container), {})
            row = rows.get(t.task_id, {})
            started = row.get("process_started")
            out[str(t.task_id)] = {
                "component": t.component, "container": t.container, "host": sm.get("host"),
                "pid": inst.get("pid", 0), "running": bool(inst.get("ready")),
                "uptime_s": round(now - started, 1) if started else None,
                "restarts": restarts.get(f"{t.component}-{t.task_id}", 0),
                "log": f"/topologies/logs?task={t.task_id}", **row}
            if t.task_id in lag:
                out[str(t.task_id)]["kafka_lag"] = lag[t.task_id]
        return {"window": window, "tasks": out}

    def series(self, q: Mapping[str, list[str]]) -> dict[str, Any]:
        comp = q.get("component", [""])[0]
        names = [c.name for c in self.tm._topo.components]
        if comp not in names:
            raise UiError(404 if comp else 400, f"expected a component parameter (one of {', '.join(names)}), "
                                                f"found {repr(comp) if comp else 'none'}")
        metric = q.get("metric", [None])[0]
        if metric not in SERIES:
            raise UiError(400, f"parameter metric: expected one of {', '.join(SERIES)}, found "
                               f"{'none' if metric is None else repr(metric)}")
        window = _window(q)
        width = dict((w[0], w[2]) for w in WINDOWS).get(window, WINDOWS[-1][2])
        return {"component": comp, "metric": metric, "window": window, "bucket_s": width,
                "unit": "ms" if metric.endswith("_ms") else "tuples/s",
                "points": [[t0, t1, round(v, 3)] for t0, t1, v in self.windows.series(comp, metric, window)]}

    def log(self, q: Mapping[str, list[str]]) -> dict[str, Any]:
        raw = q.get("task", [None])[0]
        tasks = {str(t.task_id): t for t in self.tm._packing.tasks}
        if raw not in tasks:
            ids = sorted(int(t) for t in tasks)
            if raw is None:
                raise UiError(400, f"expected a task parameter (a task id from {ids[0]} to {ids[-1]}), found none")
            raise UiError(404, f"topology '{self.tm.topology}' has no task {raw!r}; expected a task id from "
                               f"{ids[0]} to {ids[-1]}")
        offset, length = parse_paging(q.get("offset", [None])[0], q.get("length", [None])[0])
        t = tasks[raw]
        path = self.logs / f"container-{t.container}" / f"{t.component}-{t.task_id}.log"
        return {"task": t.task_id, "component": t.component, **read_page(path, offset, length)}

    def autoscale(self, raw: str | None) -> dict[str, Any]:
        """The health manager's last steps, oldest first."""
        last = _step_count(raw)
        path = self.logs / LOG_FILE
        try:
            steps = last_steps(path, last)
        except OSError as e:
            raise UiError(500, f"cannot read the health manager's record {path}: {e.strerror or e}") from None
        return {"last": last, "file": str(path), "steps": steps}


def _step_count(raw: str | None) -> int:
    if raw is None:
        return STEPS_DEFAULT
    n = int(raw) if raw.isascii() and raw.isdigit() else 0
    if not 1 <= n <= STEPS_MAX:
        raise UiError(400, f"parameter last: expected a whole number of steps from 1 to {STEPS_MAX}, found {raw!r}")
    return n


def _window(q: Mapping[str, list[str]]) -> str:
    return q.get("window", ["600"])[0]
