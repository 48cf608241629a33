"""Storm UI's numbers over time windows, pure: per task, compact time-bucketed sums of what its
metrics reports say, so the master can answer "emitted over the last 10 minutes / 3 hours /
1 day / all time" without keeping every report.

A report's counters are totals since its process started. Each report becomes the increase
since the task's previous report; a total that went down means the process was restarted, and
then the new total is the whole increase. The first report of a task counts from 0, so tuples a
spout emitted before the master's first sample still land in a bucket (and in the charts).

Memory is bounded: per task and per window, at most ``length / width + 1`` buckets of seven
floats (61 each here), whatever the uptime; tasks of components the plan does not name are
ignored.

Latencies: an instance reports ``__execute-latency-ms`` as the mean since its start, so
mean * executed is a total that differs exactly between reports; the window's mean is that
difference over the executed count. ``__process-latency-ms`` (a bolt's, arrival to ack) the same
way over the acked count. Complete latency is reported as a recent p50, so a
window's value is the p50 weighted by the acks of each report (an approximation, labelled so
in docs/operating/web-ui.md). Capacity is Storm's: time spent executing / the window's length (or the
time the task has been observed, if shorter).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

# (name, length in seconds, bucket width in seconds): 60 buckets each
WINDOWS: tuple[tuple[str, float, float], ...] = (("600", 600.0, 10.0), ("10800", 10800.0, 180.0),
                                                 ("86400", 86400.0, 1440.0))
ALL_TIME = "all"
WINDOW_NAMES = (*(w[0] for w in WINDOWS), ALL_TIME)


@dataclass
class Agg:
    """Sums over some time: counts, and latency totals (latency * count) for weighted means."""

    emitted: float = 0.0
    transferred: float = 0.0
    acked: float = 0.0
    failed: float = 0.0
    executed: float = 0.0
    exec_ms: float = 0.0  # time spent executing, ms
    complete_ms: float = 0.0  # complete latency * acked
    process_ms: float = 0.0  # a bolt's process latency * acked (Storm's: arrival to ack)
    # executing time seen between two reports of a process: the time base of capacity (what a
    # task's first report says it executed happened over a time the master did not see)
    busy_ms: float = 0.0

    def add(self, other: Agg) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass
class _Bucket:
    """A bucket's sums, and the time its increases happened in: from the report before its
    first one to its last report (reports sparser than buckets carry time from before)."""

    start: float
    agg: Agg
    since: float
    until: float


@dataclass
class _Task:
    component: str
    first_seen: float
    last_time: float = 0.0
    totals: dict[str, float] = field(default_factory=dict)  # last report's counter totals
    exec_total_ms: float = 0.0
    process_total_ms: float = 0.0
    cpu_seconds: float | None = None
    cpu_percent: float = 0.0
    rss_bytes: float = 0.0
    started: float = 0.0  # when the current process was first seen (a restart resets it)
    all_time: Agg = field(default_factory=Agg)
    buckets: list[deque[_Bucket]] = field(
        default_factory=lambda: [deque(maxlen=int(length // width) + 1) for _, length, width in WINDOWS])


def _increase(old: float | None, new: float) -> float:
    """A counter's increase; a total that went down belongs to a restarted process."""
    if old is None or new < old:
        return new
    return new - old


class MetricsWindows:
    """Per task bucketed sums. ``fanout[(component, stream)]`` is how many task deliveries one
    emit on that stream makes (Storm's "transferred" counts each); ``clock`` gives the time."""

    def __init__(self, components: Mapping[str, str], fanout: Mapping[tuple[str, str], int],
                 clock: Callable[[], float]) -> None:
        self.kinds = dict(components)  # component -> "spout" | "bolt"
        self.fanout = dict(fanout)
        self.clock = clock
        self.tasks: dict[int, _Task] = {}

    def observe(self, report: Mapping[str, Any]) -> None:
        """One instance report (the metrics manager's JSON)."""
        comp = str(report.get("component"))
        if comp not in self.kinds:
            return
        try:
            task_id, t = int(report.get("task", -1)), float(report.get("time", 0.0))
        except (TypeError, ValueError):
            return
        task = self.tasks.get(task_id)
        if task is None:
            task = self.tasks[task_id] = _Task(comp, first_seen=t, started=t)
        if t <= task.last_time:
            return  # a repeated or late report: counted already
        counters = {k: float(v) for k, v in dict(report.get("counters", {})).items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)}
        gauges = dict(report.get("gauges", {}))
        restarted = any(v < task.totals.get(k, 0.0) for k, v in counters.items())
        if restarted:
            task.totals, task.exec_total_ms, task.cpu_seconds, task.started = {}, 0.0, None, t
            task.process_total_ms = 0.0
        delta = self._delta(task, counters, gauges)
        self._process_gauges(task, dict(report.get("process", {})), t)
        since = task.last_time if task.last_time and not restarted else t  # the first: unknown, so none
        task.totals, task.last_time = counters, t
        task.all_time.add(delta)
        for (_, _, width), ring in zip(WINDOWS, task.buckets, strict=True):
            start = t // width * width
            if ring and ring[-1].start == start:
                ring[-1].agg.add(delta)
                ring[-1].until = t
            else:
                ring.append(_Bucket(start, _copy(delta), since, t))

    def _delta(self, task: _Task, counters: dict[str, float], gauges: Mapping[str, Any]) -> Agg:
        d = Agg()
        for name, v in counters.items():
            inc = _increase(task.totals.get(name), v)
            base, _, rest = name.partition("/")
            if base == "__emit-count":
                d.emitted += inc
                d.transferred += inc * self.fanout.get((task.component, rest), 0)
            elif base == "__execute-count":
                d.executed += inc
            elif base == "__ack-count":
                d.acked += inc
            elif base == "__fail-count":
                d.failed += inc
        executed_total = sum(v for k, v in counters.items() if k.startswith("__execute-count/"))
        mean = _num(gauges.get("__execute-latency-ms"))
        exec_total = mean * executed_total
        d.exec_ms = max(0.0, exec_total - task.exec_total_ms)
        d.busy_ms = d.exec_ms if task.totals else 0.0
        task.exec_total_ms = exec_total
        d.complete_ms = _num(gauges.get("__complete-latency-ms/p50")) * d.acked
        if "__process-latency-ms" in gauges:  # a mean since the start, as the execute latency
            process_total = _num(gauges.get("__process-latency-ms")) * counters.get("__ack-count", 0.0)
            d.process_ms = max(0.0, process_total - task.process_total_ms)
            task.process_total_ms = process_total
        return d

    @staticmethod
    def _process_gauges(task: _Task, process: Mapping[str, Any], t: float) -> None:
        cpu = process.get("cpu_seconds")
        if isinstance(cpu, (int, float)):
            if task.cpu_seconds is not None and t > task.last_time > 0:
                task.cpu_percent = max(0.0, 100.0 * (float(cpu) - task.cpu_seconds) / (t - task.last_time))
            task.cpu_seconds = float(cpu)
        task.rss_bytes = _num(process.get("rss_bytes"), task.rss_bytes)

    def _window_agg(self, task: _Task, window: str, now: float) -> tuple[Agg, float]:
        """The task's sums over ``window`` and the seconds they cover."""
        if window == ALL_TIME:
            return task.all_time, max(now - task.first_seen, 1.0)
        i = WINDOW_NAMES.index(window)
        length = WINDOWS[i][1]
        total = Agg()
        for b in task.buckets[i]:
            if b.start > now - length:
                total.add(b.agg)
        return total, max(min(length, now - task.first_seen), 1.0)

    def task_rows(self, window: str) -> dict[int, dict[str, Any]]:
        """Per task: the window's numbers (Storm UI's per-executor table) and process gauges."""
        _check(window)
        now = self.clock()
        out: dict[int, dict[str, Any]] = {}
        for task_id, task in sorted(self.tasks.items()):
            agg, seconds = self._window_agg(task, window, now)
            out[task_id] = {"component": task.component, **_row(agg, seconds, self.kinds[task.component]),
                            "rss_bytes": task.rss_bytes, "cpu_percent": round(task.cpu_percent, 1),
                            "process_started": task.started, "last_report": task.last_time}
        return out

    def component_rows(self, window: str) -> dict[str, dict[str, Any]]:
        """Per component: the tasks' sums; latencies weighted by counts; capacity the tasks' max."""
        _check(window)
        now = self.clock()
        sums: dict[str, Agg] = {}
        capacity: dict[str, float] = {}
        for task in self.tasks.values():
            agg, seconds = self._window_agg(task, window, now)
            sums.setdefault(task.component, Agg()).add(agg)
            capacity[task.component] = max(capacity.get(task.component, 0.0), agg.busy_ms / (seconds * 1000.0))
        out: dict[str, dict[str, Any]] = {}
        for comp, kind in self.kinds.items():
            row = _row(sums.get(comp, Agg()), 1.0, kind)
            if kind == "bolt":
                row["capacity"] = round(capacity.get(comp, 0.0), 3)
            out[comp] = {"kind": kind, **row}
        return out

    def series(self, component: str, name: str, window: str) -> list[tuple[float, float, float]]:
        """[(from, to, value)] per bucket of one count (``emitted``, ``acked``...) per second,
        summed over the component's tasks, or of a latency (``exec_ms``, ``complete_ms``: the
        weighted mean), over the span its increases happened in."""
        _check(window)
        if window == ALL_TIME:
            window = WINDOWS[-1][0]
        i = WINDOW_NAMES.index(window)
        length = WINDOWS[i][1]
        now = self.clock()
        buckets: dict[float, _Bucket] = {}
        for task in self.tasks.values():
            if task.component != component:
                continue
            for b in task.buckets[i]:
                if b.start > now - length:
                    into = buckets.setdefault(b.start, _Bucket(b.start, Agg(), b.since, b.until))
                    into.agg.add(b.agg)
                    into.since, into.until = min(into.since, b.since), max(into.until, b.until)
        out = []
        for start in sorted(buckets):
            b = buckets[start]
            a = b.agg
            if name == "exec_ms":
                v = a.exec_ms / a.executed if a.executed else 0.0
            elif name in ("complete_ms", "process_ms"):
                v = getattr(a, name) / a.acked if a.acked else 0.0
            else:
                # over the time its increases happened in (a rate over the bucket's width would
                # show the bucket still filling as a drop); a first report's lump: over 1 s
                v = getattr(a, name) / max(1.0, b.until - b.since)
            # a lump (one first report) happened before its report: drawn over the second before
            out.append((min(b.since, b.until - 1.0), b.until, v))
        return out


def _row(agg: Agg, seconds: float, kind: str) -> dict[str, Any]:
    row: dict[str, Any] = {"emitted": int(agg.emitted), "transferred": int(agg.transferred),
                           "acked": int(agg.acked), "failed": int(agg.failed)}
    if kind == "spout":
        row["complete_latency_ms"] = round(agg.complete_ms / agg.acked, 3) if agg.acked else None
    else:
        row["executed"] = int(agg.executed)
        row["execute_latency_ms"] = round(agg.exec_ms / agg.executed, 3) if agg.executed else None
        row["process_latency_ms"] = round(agg.process_ms / agg.acked, 3) if agg.acked else None
        row["capacity"] = round(agg.busy_ms / (seconds * 1000.0), 3)
    return row


def _copy(a: Agg) -> Agg:
    return Agg(**{f.name: getattr(a, f.name) for f in fields(a)})


def _num(v: Any, default: float = 0.0) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


class WindowError(ValueError):
    pass


def _check(window: str) -> None:
    if window not in WINDOW_NAMES:
        raise WindowError(f"parameter window: expected one of {', '.join(WINDOW_NAMES)} (seconds, or all), "
                          f"found {window!r}")


def fanout_of(topo: Any) -> dict[tuple[str, str], int]:
    """(component, stream) -> task deliveries per emit: one per subscribing edge, or the
    subscriber's parallelism for an ALL grouping (as Storm counts "transferred")."""
    par = {c.name: c.par for c in topo.components}
    out: dict[tuple[str, str], int] = {}
    for c in topo.components:
        for i in c.inputs:
            n = par[c.name] if i.grouping.kind.value == "all" else 1
            out[(i.component, i.stream)] = out.get((i.component, i.stream), 0) + n
    return out
