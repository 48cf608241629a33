"""Observations written by hand, for the tests of one rule's boundary at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from heron_py.elastic.observations import (
    ComponentSpec,
    ContainerWindow,
    InputStream,
    TaskWindow,
    TopologyObservation,
    UsefulTime,
    build_observation,
)
from heron_py.planner.model import GroupingKind

SECONDS = 30.0
TRACES = Path(__file__).parent / "traces"


def task(comp: str, task_id: int, records_in: float = 0.0, useful_ms: float = 0.0, *, out: float = 0.0,
         source: str = "src", queue: float = 0.0, blocked_ms: float = 0.0, container: int | None = None,
         seconds: float = SECONDS, emitted: dict[str, float] | None = None,
         executed: dict[tuple[str, str], float] | None = None) -> TaskWindow:
    """A task's window; ``emitted`` (records by stream) and ``executed`` (records by upstream
    and stream) when the test is about streams: ``out`` and the input are their sums then."""
    if executed is None:
        executed = {(source, "default"): records_in} if source else {}
    by_source: dict[str, float] = {}
    for (src, _), n in executed.items():
        by_source[src] = by_source.get(src, 0.0) + n
    out = sum(emitted.values()) if emitted else out
    return TaskWindow(comp, task_id, seconds, tuple(by_source.items()), out, useful_ms, UsefulTime.BUSY, blocked_ms,
                      queue, container, tuple(sorted((emitted or {}).items())),
                      tuple(sorted((u, s, n) for (u, s), n in executed.items())))


def spout_task(comp: str, task_id: int, out: float, useful_ms: float, *, blocked_ms: float = 0.0,
               container: int | None = None, emitted: dict[str, float] | None = None) -> TaskWindow:
    return task(comp, task_id, out=out, useful_ms=useful_ms, source="", blocked_ms=blocked_ms, container=container,
                emitted=emitted)


def bolt(name: str, parallelism: int, *streams: tuple[str, str, GroupingKind]) -> ComponentSpec:
    """A bolt subscribed to (upstream, stream, grouping) each."""
    subscribed = tuple(InputStream(*s) for s in streams)
    return ComponentSpec(name, parallelism, tuple(dict.fromkeys(s.component for s in subscribed)), False,
                         streams=subscribed)


def chain(*names_and_parallelism: tuple[str, int]) -> tuple[ComponentSpec, ...]:
    """A spout then bolts, each reading the one before."""
    out, before = [], None
    for name, p in names_and_parallelism:
        out.append(ComponentSpec(name, p, () if before is None else (before,), before is None))
        before = name
    return tuple(out)


def observation(components: tuple[ComponentSpec, ...], tasks: list[TaskWindow],
                containers: list[ContainerWindow] | None = None, seconds: float = SECONDS) -> TopologyObservation:
    return TopologyObservation(seconds, components, tuple(tasks), tuple(containers or ()))


def container(cid: int, backpressure_ms: float, **by_cause: float) -> ContainerWindow:
    return ContainerWindow(cid, SECONDS, backpressure_ms, tuple(sorted(by_cause.items())))


def trace(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((TRACES / name).read_text())
    return doc


def trace_observation(name: str) -> TopologyObservation:
    d = trace(name)
    return build_observation(d["components"], d["metrics"], d["window_secs"], stmgrs=d["stmgrs"],
                             placement=d["placement"])
