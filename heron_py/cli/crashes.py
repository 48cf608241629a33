"""A task that cannot start, seen while ``submit`` waits: its container's executor restarts it
(``restarts.json``) and its log holds the traceback of each death, so the same error twice
before the task ever initialized stops the wait at once instead of after ``--wait`` seconds of
crash loops.

Only what the local files show is read: a container whose folder is elsewhere (a Slurm node's
own disk, a pod) shows nothing here, and ``submit`` then waits as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from heron_py.common.container_layout import TopologyPaths
from heron_py.planner.model import PackingPlan

# instance/main.py's line for a task whose user code raised, and instance/execution.py's once
# initialize() returned
DIED = re.compile(r": task (\d+) \((.*)\) died: Traceback \(most recent call last\):$")
INITIALIZED = re.compile(r" task (\d+) initialized$")
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d")  # a new log record: the traceback ended


@dataclass(frozen=True)
class StartCrash:
    task: int
    component: str
    error: str  # the traceback's last line: the exception and its message
    log: Path


def start_errors(lines: Iterable[str]) -> list[str]:
    """The last line of each traceback a task died of before it initialized (since its previous
    start), oldest first; a death after an ``initialized`` line is not one (pure)."""
    out: list[str] = []
    initialized = False
    trace: list[str] | None = None  # the lines of the traceback being read

    def end() -> None:
        if trace is not None and not initialized:
            last = [line for line in trace if line.strip()]
            out.append(last[-1].strip() if last else "?")

    for line in lines:
        if trace is not None and not LOG_LINE.match(line):
            trace.append(line)
            continue
        if trace is not None:
            end()
            trace, initialized = None, False  # the executor starts the task again
        if DIED.search(line):
            trace = []
        elif INITIALIZED.search(line):
            initialized = True
    end()
    return out


def repeated_start_crash(paths: TopologyPaths, packing: PackingPlan, not_ready: set[int]) -> StartCrash | None:
    """The first task of ``not_ready`` that died twice in a row of the same error before it
    initialized, from its container's restarts.json (restarted twice at least) and its log."""
    for container in range(packing.num_containers):
        try:
            restarts = json.loads(paths.layout(container).restarts.read_text())
        except (OSError, ValueError):
            continue  # none yet (nothing restarted), or being replaced
        if not isinstance(restarts, dict):
            continue
        for t in packing.tasks_in(container):
            name = f"{t.component}-{t.task_id}"
            count = restarts.get(name)
            if t.task_id not in not_ready or not isinstance(count, int) or count < 2:
                continue
            log = paths.container_logs(container) / f"{name}.log"
            try:
                errors = start_errors(log.read_text(errors="replace").splitlines())
            except OSError:
                continue
            if len(errors) >= 2 and errors[-1] == errors[-2]:
                return StartCrash(t.task_id, t.component, errors[-1], log)
    return None
