"""A live rescale in a container (heron_py/scheduler/executor.py): the pure decision of which tasks
start and stop, then an executor on a local state store with real processes. Its daemons and
kept tasks are sleepers (they record a SIGTERM in a marker file); a task the rescale adds is the
real ``python -m instance`` command line prepare() would build. The checks: a task the packing
adds starts, through the supervision loop; a task both plans drop gets SIGTERM and leaves the
children, without the loop waiting for it; a task only the packing dropped runs on; a task
deaf to SIGTERM gets SIGKILL at the grace, on the loop's clock; a state manager that fails is
logged once a minute and read again; the daemons and kept tasks keep their pids."""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from heron_py.common.config import FORK_SERVER, IN_Q, MODE
from heron_py.common.package import build_package, sign_package
from heron_py.planner.model import PackingPlan, PhysicalPlan, TaskPlacement, TopologyDef, TopologyState
from heron_py.scheduler import executor
from heron_py.scheduler.executor import Executor, TaskChanges, TaskRescaler, task_changes
from heron_py.state import StateManagerError
from heron_py.state.localfs import LocalFsStateManager
from tests.fakes import spout_bolt_topology

SECRET = bytes(range(32))
LOG = logging.getLogger("test.executor.reconcile")
P = TaskPlacement

# container 1 runs s-1 and b-3; container 0 runs b-2
TASKS_V1 = (P(1, "s", 0, 1), P(2, "b", 0, 0), P(3, "b", 1, 1))
# b scaled to 3: task 4 joins container 1
TASKS_ADD = (*TASKS_V1, P(4, "b", 2, 1))
# b scaled to 1: task 3 leaves container 1
TASKS_DROP = (P(1, "s", 0, 1), P(2, "b", 0, 0))

# a stand-in for a daemon or a kept task: "term" records its SIGTERM and exits 0; "deaf" ignores it
SLEEPER = """
import pathlib, signal, sys, time
marker = pathlib.Path(sys.argv[1])
def on_term(signum, frame):
    marker.write_text("TERM")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term if sys.argv[2] == "term" else signal.SIG_IGN)
marker.with_suffix(".up").write_text("up")
while True:
    time.sleep(0.05)
"""


# --- the decision (pure) ---


@pytest.mark.parametrize(("packing", "applied", "running", "start", "stop"), [
    # nothing changed
    (TASKS_V1, TASKS_V1, {1, 3}, (), ()),
    # no physical plan stored yet: only the packing counts
    (TASKS_V1, None, {1}, (3,), ()),
    (TASKS_DROP, None, {1, 3}, (), (3,)),
    # the packing stages a new task before the master applies it: it starts at once
    (TASKS_ADD, TASKS_V1, {1, 3}, (4,), ()),
    # the applied plan has it too
    (TASKS_ADD, TASKS_ADD, {1, 3, 4}, (), ()),
    # the packing dropped task 3, the applied plan still routes to it: it runs on
    (TASKS_DROP, TASKS_V1, {1, 3}, (), ()),
    # both dropped it: it stops
    (TASKS_DROP, TASKS_DROP, {1, 3}, (), (3,)),
    # a removed task the applied plan still has, not running (a relaunched executor): it starts
    (TASKS_DROP, TASKS_V1, {1}, (3,), ()),
    # another container's tasks are none of this one's business
    (TASKS_V1, TASKS_V1, {1, 2, 3}, (), (2,)),
    # everything gone from both plans
    ((P(2, "b", 0, 0),), (P(2, "b", 0, 0),), {1, 3}, (), (1, 3)),
])
def test_task_changes(packing: tuple[TaskPlacement, ...], applied: tuple[TaskPlacement, ...] | None,
                      running: set[int], start: tuple[int, ...], stop: tuple[int, ...]) -> None:
    got = task_changes(1, PackingPlan(2, packing), None if applied is None else PackingPlan(2, applied), running)
    assert [t.task_id for t in got.start] == list(start)
    assert got.stop == stop


def test_a_new_task_is_started_with_the_packings_placement_sorted_by_id() -> None:
    packing = PackingPlan(2, (P(9, "b", 3, 1), P(4, "b", 2, 1), P(1, "s", 0, 1)))
    applied = PackingPlan(2, (P(7, "s", 1, 1), P(1, "s", 0, 1)))
    assert task_changes(1, packing, applied, [1]) == TaskChanges(
        start=(P(4, "b", 2, 1), P(7, "s", 1, 1), P(9, "b", 3, 1)), stop=())


# --- an executor on a local store, with real processes ---


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@dataclasses.dataclass
class Container:
    ex: Executor
    clock: Clock
    home: Path
    markers: Path
    store: LocalFsStateManager  # the CLI's and the master's view of the state manager

    def rescaler(self) -> TaskRescaler:
        assert self.ex.rescaler is not None
        return self.ex.rescaler

    def pids(self) -> dict[str, int]:
        return {c.name: c.proc.pid for c in self.ex.children if c.proc is not None}

    def marker(self, name: str) -> Path:
        return self.markers / f"{name}.term"

    def restarts(self) -> dict[str, int]:
        data: dict[str, int] = json.loads(self.ex.paths.layout(1).restarts.read_text())
        return data

    def store_plans(self, packing: tuple[TaskPlacement, ...], applied: tuple[TaskPlacement, ...] | None,
                    topology: TopologyDef | None = None) -> None:
        topo = topology or self.store.get_topology("wc")
        assert topo is not None
        if topology is not None:
            self.store.set_topology(topology, SECRET)
        self.store.set_packing_plan("wc", PackingPlan(2, packing))
        if applied is not None:
            self.store.set_physical_plan("wc", PhysicalPlan(topo, PackingPlan(2, applied), (), TopologyState.RUNNING,
                                                            len(applied)))


def _topology(b_par: int, b_config: dict[str, str] | None = None, config: dict[str, str] | None = None
              ) -> TopologyDef:
    topo = dataclasses.replace(spout_bolt_topology(1, b_par, name="wc"),
                               config={FORK_SERVER.name: "false", **(config or {})})
    if b_config is None:
        return topo
    comps = tuple(dataclasses.replace(c, config=b_config) if c.name == "b" else c for c in topo.components)
    return dataclasses.replace(topo, components=comps)


def _wait(cond: Callable[[], object], what: str, timeout_s: float = 10.0, step: Callable[[], None] | None = None
          ) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s"
        if step is not None:
            step()
        time.sleep(0.02)


def _executor(home: Path, clock: Clock, reconcile_every_s: float = 0.5, task_stop_grace_s: float = 5.0) -> Executor:
    return Executor(topology="wc", container=1, home=home, log=LOG, clock=clock, liveness_timeout_s=0.0,
                    reconcile_every_s=reconcile_every_s, task_stop_grace_s=task_stop_grace_s)


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Container]]:
    made: list[Executor] = []
    stores: list[LocalFsStateManager] = []

    def build(deaf: tuple[str, ...] = (), reconcile_every_s: float = 0.5, task_stop_grace_s: float = 5.0,
              config: dict[str, str] | None = None) -> Container:
        home = tmp_path / "home"
        store = LocalFsStateManager(home)
        stores.append(store)
        src = tmp_path / "src" / "topo.py"
        src.parent.mkdir()
        src.write_text("X = 1\n")
        store.set_secret("wc", SECRET)
        store.set_topology(_topology(2, config=config), SECRET)
        store.set_packing_plan("wc", PackingPlan(2, TASKS_V1))
        store.set_package("wc", sign_package(build_package(src, [], []), SECRET))
        clock = Clock()
        ex = _executor(home, clock, reconcile_every_s, task_stop_grace_s)
        made.append(ex)
        ex.prepare()
        markers = tmp_path / "markers"
        markers.mkdir()
        assert [c.name for c in ex.children] == ["metricsmgr", "stmgr", "s-1", "b-3"]
        for c in ex.children:
            c.argv = [sys.executable, "-c", SLEEPER, str(markers / f"{c.name}.term"),
                      "deaf" if c.name in deaf else "term"]
        ex.start()
        for up in [markers / f"{c.name}.up" for c in ex.children]:
            _wait(up.exists, up.name)  # its SIGTERM handler is set
        return Container(ex, clock, home, markers, store)

    yield build
    for ex in made:
        ex.stop(grace_s=2.0, daemons_grace_s=1.0)
        ex.state.close()
    for store in stores:
        store.close()


def _records(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOG.name and r.levelno == level]


def test_a_task_the_packing_adds_starts_from_the_supervision_loop_as_prepare_builds_it(
        make: Callable[..., Container], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    box = make()
    before = box.pids()
    # update: b scaled to 3 with its own queue size; the master has not applied it yet
    box.store_plans(TASKS_ADD, TASKS_V1, _topology(3, {IN_Q.name: "7"}))

    def step() -> None:
        box.clock.now += 0.5
        box.ex.supervise_once()

    _wait(lambda: any(c.name == "b-4" for c in box.ex.children), "b-4 in the children", step=step)
    (new,) = [c for c in box.ex.children if c.name == "b-4"]
    assert new.task and new.task_id == 4 and new.proc is not None
    assert new.proc.args == new.argv  # type: ignore[union-attr]  # a Popen: no fork server here
    # the command line prepare() builds for task 4 from the new topology (its component's config)
    fresh = _executor(box.home, Clock())
    try:
        fresh.prepare()
        assert new.argv == next(c.argv for c in fresh.children if c.name == "b-4")
    finally:
        fresh.state.close()
    assert new.argv[new.argv.index("--in-queue-batches") + 1] == "7"
    assert "rescale: task b-4 is new in container 1's plans; starting it" in _records(caplog, logging.INFO)
    assert box.restarts() == {"metricsmgr": 0, "stmgr": 0, "s-1": 0, "b-3": 0, "b-4": 0}
    # the daemons and the kept tasks were not touched
    assert {k: v for k, v in box.pids().items() if k != "b-4"} == before
    assert all(psutil.pid_exists(pid) for pid in before.values())
    assert not list(box.markers.glob("*.term"))


def test_a_task_both_plans_drop_gets_sigterm_and_leaves_the_children_without_a_wait(
        make: Callable[..., Container], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    box = make()
    before = box.pids()
    box.store_plans(TASKS_DROP, TASKS_DROP, _topology(1))
    started = time.monotonic()
    box.ex.reconcile()
    assert time.monotonic() - started < 1.0  # the grace (5 s) is not waited for here
    assert [c.name for c in box.ex.children] == ["metricsmgr", "stmgr", "s-1"]
    assert [e.child.name for e in box.rescaler().ending] == ["b-3"]
    assert (f"rescale: task b-3 left container 1's plans; stopping it (pid {before['b-3']}): SIGTERM, SIGKILL "
            f"after 5 s") in _records(caplog, logging.INFO)
    assert box.restarts() == {"metricsmgr": 0, "stmgr": 0, "s-1": 0}
    _wait(lambda: not box.rescaler().ending, "the end of b-3", step=box.ex.supervise_once)
    assert box.marker("b-3").read_text() == "TERM"
    assert not psutil.pid_exists(before["b-3"])  # reaped by the loop's poll
    # the others keep running, untouched, and nothing restarts the stopped task
    box.clock.now += 60
    box.ex.supervise_once()
    assert box.pids() == {k: v for k, v in before.items() if k != "b-3"}
    assert sorted(p.name for p in box.markers.glob("*.term")) == ["b-3.term"]
    assert not _records(caplog, logging.WARNING)


def test_a_task_only_the_packing_dropped_runs_until_the_applied_plan_drops_it(
        make: Callable[..., Container]) -> None:
    box = make()
    before = box.pids()
    box.store_plans(TASKS_DROP, TASKS_V1, _topology(1))
    box.ex.reconcile()
    assert box.pids() == before and not box.rescaler().ending
    time.sleep(0.2)
    assert not box.marker("b-3").exists() and psutil.pid_exists(before["b-3"])
    # the master applied the new packing: now it goes
    box.store_plans(TASKS_DROP, TASKS_DROP)
    box.ex.reconcile()
    assert "b-3" not in box.pids()
    _wait(lambda: box.marker("b-3").exists(), "b-3's SIGTERM")


def test_a_task_deaf_to_sigterm_is_killed_at_the_grace_on_the_loops_clock(
        make: Callable[..., Container], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    box = make(deaf=("b-3",), task_stop_grace_s=30.0)
    pid = box.pids()["b-3"]
    # while it is stopping, the loop's reaper of orphans leaves it to the poll that reads its exit
    spared: list[bool] = []

    def reap(known: set[int]) -> list[int]:
        if box.rescaler().ending:
            spared.append(pid in known)
        return []

    monkeypatch.setattr(executor, "reap_orphans", reap)
    box.store_plans(TASKS_DROP, TASKS_DROP, _topology(1))
    box.ex.reconcile()
    (ending,) = box.rescaler().ending
    box.clock.now += 29.9
    box.ex.supervise_once()
    time.sleep(0.3)
    box.ex.supervise_once()
    assert psutil.pid_exists(pid) and ending.proc.poll() is None and not ending.killed
    box.clock.now += 0.1
    box.ex.supervise_once()
    assert (f"rescale: task b-3 (pid {pid}) did not exit within 30 s of its SIGTERM; sent SIGKILL"
            in _records(caplog, logging.WARNING))
    _wait(lambda: not box.rescaler().ending, "the end of b-3", step=box.ex.supervise_once)
    assert ending.proc.returncode == -9
    assert spared and all(spared)


def test_stop_ends_a_task_the_rescale_is_still_stopping(make: Callable[..., Container]) -> None:
    box = make(deaf=("b-3",), task_stop_grace_s=30.0)
    box.store_plans(TASKS_DROP, TASKS_DROP, _topology(1))
    box.ex.reconcile()
    (ending,) = box.rescaler().ending
    box.ex.stop(grace_s=0.5, daemons_grace_s=0.5)
    assert ending.proc.returncode == -9 and box.rescaler().ending == []
    box.ex.reconcile()  # not while stopping: nothing starts again
    box.store_plans(TASKS_ADD, TASKS_ADD, _topology(3))
    box.ex.reconcile()
    assert all(c.proc is None or c.proc.poll() is not None for c in box.ex.children)
    assert "b-4" not in [c.name for c in box.ex.children]


def _failing_reads(box: Container, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The state manager's physical plan read fails until the returned list gets an item."""
    healed: list[int] = []
    real = box.ex.state.get_physical_plan

    def read(name: str) -> PhysicalPlan | None:
        if not healed:
            raise StateManagerError("ZooKeeper at zk:2181: get /heron-py/pplans/wc failed: ConnectionLoss")
        return real(name)

    monkeypatch.setattr(box.ex.state, "get_physical_plan", read)
    return healed


FAILED = ("executor 1: cannot read the plans of topology 'wc' from the state manager (localfs) to follow a "
          "rescale: ZooKeeper at zk:2181: get /heron-py/pplans/wc failed: ConnectionLoss; trying again every 0.5 s")


def test_a_state_manager_error_is_logged_once_a_minute_and_the_read_tried_again(
        make: Callable[..., Container], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    box = make()
    before = box.pids()
    healed = _failing_reads(box, monkeypatch)
    box.store_plans(TASKS_ADD, TASKS_V1, _topology(3))
    for _ in range(100):  # 50 s of reads, one every 0.5 s
        box.ex.reconcile()
        box.clock.now += 0.5
    assert _records(caplog, logging.WARNING) == [FAILED]
    assert box.pids() == before
    box.clock.now += 10.0
    box.ex.reconcile()
    assert _records(caplog, logging.WARNING) == [FAILED, FAILED + " (99 similar not logged in the last 60 s)"]
    healed.append(1)
    box.ex.reconcile()
    assert "b-4" in box.pids()
    assert "executor 1: read the plans of topology 'wc' again after 101 failed reads" in _records(caplog, logging.INFO)
    assert {k: v for k, v in box.pids().items() if k != "b-4"} == before


def test_the_loop_reads_every_reconcile_every_s_off_its_thread_and_logs_a_failed_read(
        make: Callable[..., Container], caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    caplog.set_level(logging.INFO, logger=LOG.name)
    box = make(reconcile_every_s=2.0)
    healed = _failing_reads(box, monkeypatch)
    reads: list[float] = []
    real = box.ex.state.get_packing_plan

    def counted(name: str) -> PackingPlan | None:
        reads.append(box.clock.now)
        return real(name)

    monkeypatch.setattr(box.ex.state, "get_packing_plan", counted)

    def settle() -> None:
        box.ex.supervise_once()
        _wait(lambda: not box.rescaler().read.busy, "the read's outcome", step=box.ex.supervise_once)

    settle()
    assert reads == [100.0]
    assert _records(caplog, logging.WARNING) == [FAILED.replace("every 0.5 s", "every 2 s")]
    box.clock.now = 101.9
    settle()
    assert reads == [100.0]
    healed.append(1)
    box.store_plans(TASKS_ADD, TASKS_V1, _topology(3))
    box.clock.now = 102.0
    settle()
    assert reads == [100.0, 102.0]
    assert "b-4" in box.pids()


def test_an_effectively_once_container_follows_the_plans_too(make: Callable[..., Container]) -> None:
    """Every update repacks with kept tasks in place, so an effectively-once container follows
    the stored packing as the others do: a kept task keeps its process (it restores in place),
    the dropped one is stopped."""
    eo = {MODE.name: "EFFECTIVELY_ONCE"}
    box = make(config=eo)
    before = box.pids()
    assert box.ex.rescaler is not None
    box.store_plans(TASKS_DROP, TASKS_DROP, _topology(1, config=eo))

    def step() -> None:
        box.clock.now += 0.5
        box.ex.supervise_once()

    _wait(lambda: "b-3" not in box.pids(), "b-3 stopped", step=step)
    assert box.pids() == {k: v for k, v in before.items() if k != "b-3"}
