"""``Faults``: the faults a ``Harness`` test asks for, and the guards that inject them.

- ``kill_at``: a bolt task dies when its nth tuple arrives (``TaskKilled``, before processing it);
- ``fail_at``: a bolt fails a tuple (the engine's ``fail``) instead of processing it.

A spout task dies at a ``TestSource``'s ``ABORT`` item, which the source raises itself. The
rules are checked against the topology when set, and read at each tuple, so a test may add one
between two harness calls; a guard is put around a bolt's ``process`` each time its component
is (re)made, and counts across restarts on the task it is given.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from heron_py.planner.model import ComponentKind, PhysicalPlan
from heron_py.runtime.host import BoltHost
from heron_py.testing.inprocess import fused_hint
from heron_py.testing.source import TaskKilled

Process = Callable[[Any], None]
ProcessBatch = Callable[[list[Any]], tuple[list[Any], int]]


class GuardedTask(Protocol):
    """What a guard reads of a task: who it is, and its tuples received across restarts."""

    task_id: int
    component: str
    index: int  # within its component
    received: int


@dataclass
class _FailRule:
    component: str
    nth: int | None
    when: Callable[[Any], bool] | None
    times: int
    seen: int = 0
    failed: int = 0


class Faults:
    """The kill and fail rules over one topology's plan."""

    def __init__(self, plan: PhysicalPlan) -> None:
        self._plan = plan
        self._kills: dict[tuple[str, int], int] = {}  # (component, task index) -> nth tuple
        self._fails: list[_FailRule] = []

    def kill_at(self, component: str, task_index: int, nth_tuple: int) -> None:
        self._check_bolt("kill_at", component)
        n = len(self._plan.packing.tasks_of(component))
        if not 0 <= task_index < n:
            raise ValueError(f"kill_at: task_index {task_index} of '{component}': expected 0..{n - 1}, "
                             f"found {task_index}")
        if nth_tuple < 1:
            raise ValueError(f"kill_at: nth_tuple of '{component}': expected an int >= 1, found {nth_tuple}")
        self._kills[(component, task_index)] = nth_tuple

    def fail_at(self, component: str, nth: int | None, when: Callable[[Any], bool] | None, times: int) -> None:
        self._check_bolt("fail_at", component)
        if (nth is None) == (when is None):
            raise ValueError(f"fail_at('{component}'): expected exactly one of nth or when, found "
                             f"{'both' if nth is not None else 'neither'}")
        if nth is not None and nth < 1:
            raise ValueError(f"fail_at('{component}'): nth: expected an int >= 1, found {nth}")
        self._fails.append(_FailRule(component, nth, when, 1 if nth is not None else times))

    def guard(self, task: GuardedTask, host: BoltHost) -> None:
        """Puts the guards around the bolt's (new) component: its tracked tuples one at a time,
        and its untracked batches (heron_process_batch: the Streamlet operators)."""
        host._process = self._guarded(task, host, host._process)
        if host._batch is not None:
            host._batch = self._guarded_batch(task, host._batch)

    def _kill_due(self, task: GuardedTask, first: int) -> None:
        """Raises TaskKilled when the task's kill rule falls on a tuple in ``first``..received."""
        key = (task.component, task.index)
        nth = self._kills.get(key)
        if nth is not None and first <= nth <= task.received:
            del self._kills[key]  # once per kill_at call
            raise TaskKilled(task.component, task.task_id, f"kill_at its tuple {nth}")

    def _guarded(self, task: GuardedTask, host: BoltHost, process: Process) -> Process:
        fails = self._fails  # read at each tuple: rules may be added after the start

        def run(tup: Any) -> None:
            task.received += 1
            self._kill_due(task, task.received)
            for r in fails:
                if r.component != task.component:
                    continue
                r.seen += 1
                if r.failed < r.times and (r.seen == r.nth if r.when is None else r.when(tup)):
                    r.failed += 1
                    host.user.delegate.fail(tup)  # the engine's fail, whatever the bolt overrides
                    return
            process(tup)

        return run

    def _guarded_batch(self, task: GuardedTask, process_batch: ProcessBatch) -> ProcessBatch:
        """An untracked batch counts towards ``kill_at`` as its tuples do: the task dies at the
        batch holding its nth tuple, before processing it (what it would have emitted of the batch
        is lost either way). ``fail_at`` concerns tracked tuples, which come through ``process``."""

        def run(values: list[Any]) -> tuple[list[Any], int]:
            first = task.received + 1
            task.received += len(values)
            self._kill_due(task, first)
            return process_batch(values)

        return run

    def _check_bolt(self, what: str, component: str) -> None:
        topology = self._plan.topology
        names = [c.name for c in topology.components]
        fused_hint(topology, what, component)
        if component not in names:
            raise ValueError(f"{what}: component '{component}' is not in topology '{topology.name}' "
                             f"(components: {', '.join(names)})")
        if topology.component(component).kind is not ComponentKind.BOLT:
            raise ValueError(f"{what}: component '{component}' is a spout; expected a bolt (a spout task "
                             f"crashes at an ABORT item of a TestSource)")
