"""The metrics manager's state, pure: the latest report of every process in the container,
the exceptions seen (with counts), and renderings for Prometheus and the file sink.

A report is a JSON object sent every ``topology.metrics.export.interval.secs`` by an
instance or a stream manager:

    {"kind": "instance" | "stmgr", "task": 3, "component": "split", "container": 0,
     "time": 1700000000.0,
     "counters": {"__emit-count/default": 120, ...},   # totals since the process started
     "gauges": {"__execute-latency-ms/sentence/default": 0.02, ...},
     "process": {"cpu_seconds": 1.5, "rss_bytes": 40960000, "threads": 3, "open_fds": 12},
     "user": {"my-metric": 3, "my-multi": {"a": 1}},
     "exceptions": [{"id": "...", "trace": "Traceback ...", "time": 1700000000.0}]}

Metric names keep Heron's (``__emit-count/<stream>``); for Prometheus, the part before the
first "/" becomes the metric name (``heron_emit_count``) and the rest a label (``stream`` for
emit counts, ``source`` and ``stream`` for execute counts, ``key`` otherwise; the rule is
heron_py/common/metric_names.py, shared with the topology master).

The health manager (``heron-py autoscale``) sends no report: it runs outside the containers, and
its steps are the lines of its record, ``logs/autoscale.jsonl``. ``AutoscaleTally`` counts them
for the metrics manager of container 0, which exports them (prom.py reads the record at each
scrape): ``heron_autoscale_actions_total{action, outcome}``, ``heron_autoscale_diagnoses_total
{diagnosis, component}``, ``heron_autoscale_asked_parallelism{component}``,
``heron_autoscale_last_step_timestamp_seconds`` and ``heron_autoscale_unreadable_lines_total``,
each with the ``topology`` label.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from heron_py.common.metric_names import COUNTERS, STMGR_COMPONENT, split_name

_NAME = re.compile(r"[^a-zA-Z0-9_]")

# Bounds of what the store keeps between reports: it is sent whole to the master
# every interval, so it must not grow with a task's uptime or a peer's output.
MAX_TRACE_CHARS = 8 * 1024  # one stack trace; longer ones keep their head and tail
MAX_EXCEPTION_BYTES = 512 * 1024  # all traces kept; the least recently seen go first
MAX_SEEN_ID_BYTES = 128 * 1024  # exception ids remembered to count each report's repeat once


def clip_trace(trace: str) -> str:
    """A trace under MAX_TRACE_CHARS: its head (where it was raised from) and tail (the error)."""
    if len(trace) <= MAX_TRACE_CHARS:
        return trace
    half = MAX_TRACE_CHARS // 2
    return f"{trace[:half]}\n... ({len(trace) - 2 * half} characters cut) ...\n{trace[-half:]}"


def prom_name(heron_name: str) -> str:
    return "heron_" + _NAME.sub("_", heron_name.lstrip("_")).lower()


@dataclass
class ExceptionRecord:
    task: int
    component: str
    trace: str
    count: int
    first: float
    last: float

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "component": self.component, "stacktrace": self.trace, "count": self.count,
                "firsttime": self.first, "lasttime": self.last}


class ReportError(ValueError):
    pass


REPORT_KINDS = ("instance", "stmgr", "tmanager")  # a task, the stream manager, a topology master


def parse_report(raw: bytes) -> dict[str, Any]:
    """A report from the wire, checked: hostile input gets one clear error."""
    try:
        doc = json.loads(raw)
    except ValueError as e:
        raise ReportError(f"metrics report: expected a JSON object, found invalid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ReportError(f"metrics report: expected a JSON object, found {type(doc).__name__}")
    kind = doc.get("kind")
    if kind not in REPORT_KINDS:
        raise ReportError(f"metrics report: expected kind 'instance', 'stmgr' or 'tmanager', found {kind!r}")
    for key in ("counters", "gauges", "process", "user"):
        v = doc.get(key, {})
        if not isinstance(v, dict):
            raise ReportError(f"metrics report: expected '{key}' to be an object, found {type(v).__name__}")
    return doc


@dataclass
class MetricsStore:
    topology: str
    container: int
    latest: dict[str, dict[str, Any]] = field(default_factory=dict)  # source key -> last report
    exceptions: dict[tuple[int, str], ExceptionRecord] = field(default_factory=dict)
    restarts: dict[str, int] = field(default_factory=dict)
    # what the bounds made the store forget: records (with their counts) and ids
    exceptions_dropped: int = 0
    exception_ids_forgotten: int = 0
    _exception_bytes: int = 0
    # insertion-ordered, so the oldest ids are forgotten first
    _seen_exception_ids: dict[str, None] = field(default_factory=dict)
    _seen_id_bytes: int = 0
    # the metrics manager's own counters (reports it dropped, connections it refused), read at
    # each export: they change where no report comes in
    own: Callable[[], dict[str, float]] = field(default=dict)

    @staticmethod
    def source_key(doc: dict[str, Any]) -> str:
        kind = doc["kind"]
        if kind == "instance":
            return f"task {doc.get('task')}"
        return "tmanager" if kind == "tmanager" else f"stmgr {doc.get('container')}"

    def update(self, doc: dict[str, Any]) -> None:
        self.latest[self.source_key(doc)] = doc
        for e in doc.get("exceptions", []) or []:
            eid = str(e.get("id", ""))
            if not eid or eid in self._seen_exception_ids:
                continue  # a report repeats an exception until the next one; count it once
            self._remember_id(eid)
            trace = clip_trace(str(e.get("trace", "")))
            key = (int(doc.get("task", -1)), trace)
            t = float(e.get("time", doc.get("time", 0.0)))
            rec = self.exceptions.get(key)
            if rec is None:
                self.exceptions[key] = ExceptionRecord(key[0], str(doc.get("component", "")), trace, 1, t, t)
                self._exception_bytes += len(trace)
                self._evict_exceptions()
            else:
                rec.count += 1
                rec.last = max(rec.last, t)

    def _remember_id(self, eid: str) -> None:
        self._seen_exception_ids[eid] = None
        self._seen_id_bytes += len(eid)
        while self._seen_id_bytes > MAX_SEEN_ID_BYTES and self._seen_exception_ids:
            old = next(iter(self._seen_exception_ids))
            del self._seen_exception_ids[old]
            self._seen_id_bytes -= len(old)
            self.exception_ids_forgotten += 1

    def _evict_exceptions(self) -> None:
        """Keeps the traces under MAX_EXCEPTION_BYTES, forgetting the least recently seen."""
        while self._exception_bytes > MAX_EXCEPTION_BYTES and len(self.exceptions) > 1:
            key = min(self.exceptions, key=lambda k: self.exceptions[k].last)
            rec = self.exceptions.pop(key)
            self._exception_bytes -= len(rec.trace)
            self.exceptions_dropped += rec.count

    def samples(self) -> Iterator[tuple[str, dict[str, str], float, bool]]:
        """(Heron metric name, labels, value, is_counter) for every value held."""
        for n, c in sorted(self.restarts.items()):
            yield "__restarts", {"process": n, "container": str(self.container)}, float(c), True
        # what the store's bounds made it forget, so a flood of exceptions is visible
        yield "__exceptions-dropped", {"container": str(self.container)}, float(self.exceptions_dropped), True
        mine = {"container": str(self.container), "component": "__metricsmgr__", "task": "metricsmgr"}
        for name, v in sorted(self.own().items()):
            metric, labels = split_name(name)
            yield metric, {**mine, **labels}, float(v), metric in COUNTERS
        for doc in self.latest.values():
            base = {"container": str(self.container)}
            if doc["kind"] == "instance":
                base.update(component=str(doc.get("component", "")), task=str(doc.get("task", "")))
            elif doc["kind"] == "tmanager":
                base.update(component="__tmanager__", task="tmanager")
            else:
                base.update(component=STMGR_COMPONENT, task="stmgr")
            for section in ("counters", "gauges"):
                for name, v in doc.get(section, {}).items():
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        metric, labels = split_name(name)
                        yield metric, {**base, **labels}, float(v), metric in COUNTERS
            for name, v in doc.get("process", {}).items():
                if isinstance(v, (int, float)):
                    yield f"__process-{name}", dict(base), float(v), name == "cpu_seconds"
            for name, v in doc.get("user", {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    yield f"user/{name}", dict(base), float(v), False
                elif isinstance(v, dict):
                    for k, kv in v.items():
                        if isinstance(kv, (int, float)) and not isinstance(kv, bool):
                            yield f"user/{name}", {**base, "key": str(k)}, float(kv), False

    def families(self) -> dict[str, tuple[bool, list[str], list[tuple[list[str], float]]]]:
        """Prometheus families: name -> (is counter, label names, [(label values, value)]).
        Every sample of a family gets the family's full label set ("" where it has none)."""
        raw: dict[str, tuple[bool, list[tuple[dict[str, str], float]]]] = {}
        for metric, labels, value, counter in self.samples():
            name = prom_name(metric.replace("/", "_"))
            raw.setdefault(name, (counter, []))[1].append(({"topology": self.topology, **labels}, value))
        out: dict[str, tuple[bool, list[str], list[tuple[list[str], float]]]] = {}
        for name, (counter, rows) in raw.items():
            names = sorted({k for labels, _ in rows for k in labels})
            out[name] = (counter, names, [([labels.get(k, "") for k in names], v) for labels, v in rows])
        return out

    def sink_line(self, now: float) -> str:
        """One JSON-lines record of everything held (the file sink)."""
        return json.dumps({"time": now, "topology": self.topology, "container": self.container,
                           "reports": list(self.latest.values()), "restarts": self.restarts}, sort_keys=True)

    def for_tm(self) -> list[dict[str, Any]]:
        return list(self.latest.values())

    def exception_list(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in sorted(self.exceptions.values(), key=lambda r: (r.task, r.first))]


# --- the health manager's steps ---

Families = dict[str, tuple[bool, list[str], list[tuple[list[str], float]]]]
# a step's action by the command that carries it out (heron-py update, heron-py restart NAME K)
AUTOSCALE_ACTIONS = {"scale": "update", "restart": "restart", "none": "none"}
# the (action, outcome) pairs a health manager's record holds, exported from 0 on so that a
# query's increase() sees the first of each
AUTOSCALE_OUTCOMES = (("update", "done"), ("update", "failed"), ("restart", "done"), ("restart", "failed"),
                      ("none", "none"), ("none", "no_observation"))


def step_action(step: Mapping[str, Any]) -> tuple[str, str] | None:
    """(action, outcome) of one step of the record: action ``update``, ``restart`` or ``none``;
    outcome ``done`` or ``failed`` (carried out), ``dry_run`` (not carried out), ``none`` (no
    action) or ``no_observation`` (the step could not observe the topology). None for a step
    whose action is not one of them."""
    if step.get("decision") == "no observation":
        return "none", "no_observation"
    action = step.get("action")
    kind = AUTOSCALE_ACTIONS.get(str(action.get("kind"))) if isinstance(action, dict) else None
    if kind is None:
        return None
    outcome = step.get("outcome")
    if not isinstance(outcome, dict):
        return kind, "none"
    if outcome.get("dry_run"):
        return kind, "dry_run"
    return kind, "done" if outcome.get("ok") is True else "failed"


def asked_parallelism(step: Mapping[str, Any]) -> dict[str, int]:
    """The parallelism a step asked ``heron-py update`` for, per component it changes: a scale
    carried out, whether or not it succeeded; nothing for any other step."""
    if step_action(step) not in (("update", "done"), ("update", "failed")):
        return {}
    wanted = step["action"].get("parallelism")
    if not isinstance(wanted, dict):
        return {}
    return {str(c): p for c, p in wanted.items() if isinstance(p, int) and not isinstance(p, bool)}


@dataclass
class AutoscaleTally:
    """The health manager's steps as Prometheus families. ``add`` counts a step (its action and
    outcome, each of its diagnoses by kind and component) and keeps what the gauges show: the
    parallelism last asked for per component, and the last step's time. ``seed`` keeps only the
    latter, from steps recorded before the counting began: a counter counts from its process's
    start, while the last parallelism asked for is the last one whenever it was asked."""

    actions: dict[tuple[str, str], int] = field(default_factory=lambda: dict.fromkeys(AUTOSCALE_OUTCOMES, 0))
    diagnoses: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, component) -> count
    asked: dict[str, int] = field(default_factory=dict)
    last_step: float | None = None

    def seed(self, steps: Iterable[Mapping[str, Any]]) -> None:
        for step in steps:
            self._keep(step)

    def add(self, step: Mapping[str, Any]) -> None:
        action = step_action(step)
        if action is not None:
            self.actions[action] = self.actions.get(action, 0) + 1
        diagnoses = step.get("diagnoses")
        for d in diagnoses if isinstance(diagnoses, list) else ():
            if isinstance(d, dict) and "kind" in d and "component" in d:
                key = (str(d["kind"]), str(d["component"]))
                self.diagnoses[key] = self.diagnoses.get(key, 0) + 1
        self._keep(step)

    def _keep(self, step: Mapping[str, Any]) -> None:
        self.asked.update(asked_parallelism(step))
        t = step.get("time")
        if isinstance(t, (int, float)) and not isinstance(t, bool) and (self.last_step is None or t > self.last_step):
            self.last_step = float(t)

    def families(self, topology: str, unreadable: int) -> Families:
        """name -> (is counter, label names, [(label values, value)]), as MetricsStore.families;
        ``unreadable``: the lines of the record that were not a step."""
        actions = [([topology, a, o], float(n)) for (a, o), n in sorted(self.actions.items())]
        diagnoses = [([topology, k, c], float(n)) for (k, c), n in sorted(self.diagnoses.items())]
        out: Families = {
            "heron_autoscale_actions": (True, ["topology", "action", "outcome"], actions),
            "heron_autoscale_diagnoses": (True, ["topology", "diagnosis", "component"], diagnoses),
            "heron_autoscale_asked_parallelism": (False, ["topology", "component"],
                                                  [([topology, c], float(p)) for c, p in sorted(self.asked.items())]),
            "heron_autoscale_unreadable_lines": (True, ["topology"], [([topology], float(unreadable))]),
        }
        if self.last_step is not None:
            out["heron_autoscale_last_step_timestamp_seconds"] = (False, ["topology"], [([topology], self.last_step)])
        return out
