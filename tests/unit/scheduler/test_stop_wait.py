"""The local scheduler's stop: one wait for all the signalled processes (pure, on a manual clock),
a zombie counted as exited, a stopped process ended within the grace, the supervisor's wait
between passes ended by SIGTERM (real processes and signals), and a container's stop order."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from heron_py.scheduler.executor import Child, stop_waves
from heron_py.scheduler.local import exited, stop_processes, wait_exited
from heron_py.scheduler.supervisor import WakingStop
from heron_py.testing import ManualClock


def test_one_wait_for_all_ends_at_the_first_poll_after_the_slowest_exit() -> None:
    clock = ManualClock(100.0)
    exit_at = {"a": 100.05, "b": 100.30, "c": 100.31}
    alive = wait_exited(list(exit_at), 10.0, lambda n: clock() >= exit_at[n], clock=clock, sleep=clock.sleep,
                        poll_s=0.02)
    assert alive == []
    # the slowest exits at 100.31: seen at the next 20 ms poll, not after a per-process wait each
    assert clock() == pytest.approx(100.32)


def test_the_processes_still_running_at_the_timeout_are_returned_in_order_and_no_sleep_overshoots() -> None:
    clock = ManualClock(0.0)
    exit_at = {"a": 0.5, "b": 99.0, "c": 0.1, "d": 50.0}
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        clock.sleep(s)

    alive = wait_exited(["a", "b", "c", "d"], 1.0, lambda n: clock() >= exit_at[n], clock=clock, sleep=sleep,
                        poll_s=0.3)
    assert alive == ["b", "d"]
    assert clock() == pytest.approx(1.0)  # the last sleep is cut to the deadline
    assert slept == pytest.approx([0.3, 0.3, 0.3, 0.1])


def test_processes_already_gone_cost_no_wait_at_all() -> None:
    clock = ManualClock(0.0)
    assert wait_exited(["a", "b"], 5.0, lambda n: True, clock=clock, sleep=clock.sleep) == []
    assert clock() == 0.0
    assert wait_exited([], 5.0, lambda n: False, clock=clock, sleep=clock.sleep) == []
    assert clock() == 0.0


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()


def test_a_zombie_has_exited_though_its_pid_still_exists(child: subprocess.Popen[bytes]) -> None:
    proc = psutil.Process(child.pid)
    assert not exited(proc)
    os.kill(child.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while proc.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    # not reaped (nobody waited for it): psutil's wait_procs would still wait for this one
    assert psutil.pid_exists(child.pid) and proc.status() == psutil.STATUS_ZOMBIE
    assert exited(proc)
    child.wait()
    assert exited(proc)  # reaped: gone


def test_a_stopped_process_ends_on_sigterm_within_the_grace_not_by_sigkill(child: subprocess.Popen[bytes]) -> None:
    time.sleep(0.2)  # let the interpreter start, so its SIGTERM ends it (default action)
    os.kill(child.pid, signal.SIGSTOP)
    start = time.monotonic()
    killed = stop_processes([psutil.Process(child.pid)], 20.0, "test stop")
    took = time.monotonic() - start
    assert killed == []  # SIGCONT let the pending SIGTERM end it
    assert took < 5.0, f"stop took {took:.2f} s"
    assert child.wait(timeout=5) == -signal.SIGTERM


def test_the_supervisors_wait_between_passes_ends_at_sigterm() -> None:
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        stop = WakingStop()
        assert stop.wait(0.01) is False  # no signal: the whole timeout, and not requested
        timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM))
        timer.start()
        start = time.monotonic()
        assert stop.wait(30.0) is True
        took = time.monotonic() - start
        timer.join()
        assert took < 10.0, f"the wait went on {took:.2f} s after SIGTERM (a sleep would take 30 s)"
        assert stop.requested
        stop.close()
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def test_a_container_stops_its_tasks_before_the_daemons_they_drain_and_report_to() -> None:
    def child(name: str, task: bool = False) -> Child:
        return Child(name, ["python", "-m", name], Path(f"/logs/{name}.log"), task=task)

    children = [child("tmanager"), child("metricsmgr"), child("stmgr"), child("sentence-1", True),
                child("split-3", True), child("tmanager-standby")]
    tasks, daemons = stop_waves(children)
    assert [c.name for c in tasks] == ["sentence-1", "split-3"]
    assert [c.name for c in daemons] == ["tmanager", "metricsmgr", "stmgr", "tmanager-standby"]
    assert stop_waves([]) == ([], [])
