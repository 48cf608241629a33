"""Observations written by hand, for the tests of one rule's boundary at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from heron_py.elastic.observations import (
    ComponentSpec,
    ContainerWindow,
    TaskWindow,
    TopologyObservation,
    UsefulTime,
    build_observation,
)

SECONDS = 30.0
TRACES = Path(__file__).parent / "traces"


def task(comp: str, task_id: int, records_in: float = 0.0, useful_ms: float = 0.0, *, out: float = 0.0,
         source: str = "src", queue: float = 0.0, blocked_ms: float = 0.0, container: int | None = None,
         seconds: float = SECONDS) -> TaskWindow:
    received = ((source, records_in),) if source else ()
    return TaskWindow(comp, task_id, seconds, received, out, useful_ms, UsefulTime.BUSY, blocked_ms, queue, container)


def spout_task(comp: str, task_id: int, out: float, useful_ms: float, *, blocked_ms: float = 0.0,
               container: int | None = None) -> TaskWindow:
    return task(comp, task_id, out=out, useful_ms=useful_ms, source="", blocked_ms=blocked_ms, container=container)


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
