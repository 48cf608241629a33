"""The local scheduler never signals a pid it cannot prove is the topology's (pids are
reused), stops the processes a SIGKILLed executor left behind, and turns a permission error
into one clear message."""

from __future__ import annotations

import getpass
import logging
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from heron_py.cli.main import main
from heron_py.common.container_layout import TOPOLOGY_ID_ENV, TopologyPaths
from heron_py.planner.model import TopologyDef
from heron_py.scheduler.base import SchedulerError
from heron_py.scheduler.local import STARTED_KEY, LocalScheduler
from heron_py.state import LocalFsStateManager
from heron_py.testing import run_local
from tests.conftest import EXAMPLES
from tests.support import run_cli
from tests.support import wait_for as _wait

NAME = "ident"
TID = "ident-0123456789ab"
REAL_KILL = os.kill


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """``sleep 60`` processes a test starts; stopped afterwards, whatever the test did."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            REAL_KILL(p.pid, signal.SIGKILL)
        p.wait()


def _sleep(procs: list[subprocess.Popen[bytes]], topology_id: str | None = None) -> psutil.Process:
    env = {k: v for k, v in os.environ.items() if k != TOPOLOGY_ID_ENV}
    if topology_id is not None:
        env[TOPOLOGY_ID_ENV] = topology_id
    p = subprocess.Popen(["sleep", "60"], env=env)
    procs.append(p)
    return psutil.Process(p.pid)


def _record(state: LocalFsStateManager, proc: psutil.Process, started: float) -> None:
    """A scheduler record whose container 0 is ``proc``, launched at ``started``."""
    state.set_topology(TopologyDef(name=NAME, components=()))
    state.set_scheduler_location(NAME, {"scheduler": "local", "topology_id": TID, "host": "127.0.0.1",
                                        "executors": {"0": proc.pid}, STARTED_KEY: {"0": started}})


def _skip_message(action: str, proc: psutil.Process, started: float, found_id: str) -> str:
    return (f"{action}: pid {proc.pid} (executor of container 0) is not this topology's executor any more: "
            f"expected a process started at {started:.2f} with {TOPOLOGY_ID_ENV}={TID}, found 'sleep' started at "
            f"{proc.create_time():.2f} with {TOPOLOGY_ID_ENV} {found_id}; left alone (not signalled)")


def test_kill_leaves_a_reused_pid_alone(heron_home: Path, sleepers: list[subprocess.Popen[bytes]],
                                        caplog: pytest.LogCaptureFixture) -> None:
    # the recorded executor is gone and its pid now belongs to an unrelated process
    other = _sleep(sleepers)
    state = LocalFsStateManager(heron_home)
    _record(state, other, other.create_time() - 100.0)
    with caplog.at_level(logging.WARNING, logger="heron_py.scheduler.local"):
        assert LocalScheduler(state, heron_home).kill(NAME, grace_s=0.5) == []
    assert other.is_running() and other.status() != psutil.STATUS_ZOMBIE
    assert [r.getMessage() for r in caplog.records] == [
        _skip_message(f"kill local '{NAME}'", other, other.create_time() - 100.0, "unset")]

    # the same through the CLI: the warning, then the topology is gone; the process lives on
    proc = run_cli(heron_home, "kill", "local", NAME)
    assert (proc.returncode, proc.stderr) == (
        0, _skip_message(f"kill local '{NAME}'", other, other.create_time() - 100.0, "unset") + "\n")
    assert proc.stdout == f"topology '{NAME}' killed; logs kept in {TopologyPaths.of(NAME, heron_home).logs}\n"
    assert other.is_running() and other.status() != psutil.STATUS_ZOMBIE


def test_a_matching_create_time_of_another_topology_is_not_enough(
        heron_home: Path, sleepers: list[subprocess.Popen[bytes]], caplog: pytest.LogCaptureFixture) -> None:
    other = _sleep(sleepers, topology_id="another-topology")
    state = LocalFsStateManager(heron_home)
    _record(state, other, other.create_time())
    with caplog.at_level(logging.WARNING, logger="heron_py.scheduler.local"):
        LocalScheduler(state, heron_home).kill(NAME, grace_s=0.5)
    assert other.is_running() and other.status() != psutil.STATUS_ZOMBIE
    assert [r.getMessage() for r in caplog.records] == [
        _skip_message(f"kill local '{NAME}'", other, other.create_time(), "another-topology")]


def test_restart_leaves_a_reused_pid_alone(heron_home: Path, sleepers: list[subprocess.Popen[bytes]],
                                           caplog: pytest.LogCaptureFixture) -> None:
    other = _sleep(sleepers)
    state = LocalFsStateManager(heron_home)
    _record(state, other, other.create_time() - 100.0)
    TopologyPaths.of(NAME, heron_home).logs.mkdir(parents=True)
    sched = LocalScheduler(state, heron_home)
    with caplog.at_level(logging.WARNING, logger="heron_py.scheduler.local"):
        sched.restart(NAME, [0], 1, grace_s=0.5)
    assert other.is_running() and other.status() != psutil.STATUS_ZOMBIE
    assert [r.getMessage() for r in caplog.records] == [
        _skip_message(f"restart local '{NAME}'", other, other.create_time() - 100.0, "unset")]
    # the new executor is recorded with its own create time (it exits at once: no package stored)
    info = state.get_scheduler_location(NAME)
    assert info is not None and info["executors"]["0"] != other.pid and info[STARTED_KEY]["0"] > 0


def _deny_signals(monkeypatch: pytest.MonkeyPatch) -> None:
    def kill(pid: int, sig: int) -> None:
        if sig == 0:  # psutil's "does it exist" probe
            return REAL_KILL(pid, sig)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "kill", kill)


def test_a_permission_error_is_one_clear_message(heron_home: Path, sleepers: list[subprocess.Popen[bytes]],
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    ours = _sleep(sleepers, topology_id=TID)
    state = LocalFsStateManager(heron_home)
    _record(state, ours, ours.create_time())
    _deny_signals(monkeypatch)
    user = getpass.getuser()
    expected = (f"permission denied sending SIGTERM to pid {ours.pid} of user {user}; expected processes of user "
                f"{user} (run heron-py as the user who submitted the topology)")
    sched = LocalScheduler(state, heron_home)
    with pytest.raises(SchedulerError) as e:
        sched.kill(NAME, grace_s=0.5)
    assert str(e.value) == f"kill local '{NAME}': {expected}"
    with pytest.raises(SchedulerError) as e:
        sched.restart(NAME, [0], 1, grace_s=0.5)
    assert str(e.value) == f"restart local '{NAME}': {expected}"
    # the CLI says it in one line, and keeps the topology's state (it still runs)
    assert main(["kill", "local", NAME]) == 1
    assert capsys.readouterr().err == f"heron-py: error: kill local '{NAME}': {expected}\n"
    assert state.get_topology(NAME) is not None


def _stmgrs(topology_id: str, container: int) -> list[psutil.Process]:
    """The container's live stream managers. A process that exits between the listing and the
    look at its command line (an orphan's stream manager stopping, a zombie until it is reaped)
    is not one."""
    out = []
    for p in LocalScheduler.topology_processes(topology_id):
        try:
            cmd = p.cmdline()
        except psutil.NoSuchProcess:  # ZombieProcess included
            continue
        if "stream_manager" in cmd and cmd[cmd.index("--container") + 1] == str(container):
            out.append(p)
    return out


@pytest.mark.integration
def test_restart_after_a_sigkilled_executor_leaves_one_stream_manager(heron_home: Path) -> None:
    name = "orphans"
    run_local(EXAMPLES / "paced_word_count.py", ["--rate", "100"], home=heron_home, name=name,
              capture=["count"], keep_running=True, until=lambda r: len(r["count"]) > 50)
    state = LocalFsStateManager(heron_home)
    info = state.get_scheduler_location(name)
    assert info is not None
    tid = info["topology_id"]
    assert len(_stmgrs(tid, 1)) == 1
    # the executor dies without a word: its children are orphans until they see it gone and
    # stop (within a second: alive.py); the supervisor relaunches the container only after that
    os.kill(int(info["executors"]["1"]), signal.SIGKILL)
    _wait(lambda: not psutil.pid_exists(int(info["executors"]["1"])), 10, "the executor to die")
    assert len(_stmgrs(tid, 1)) <= 1

    proc = run_cli(heron_home, "restart", "local", name, "--container", "1")
    assert proc.returncode == 0, proc.stderr
    after = state.get_scheduler_location(name)
    assert after is not None
    sms = _stmgrs(tid, 1)
    assert len(sms) == 1 and sms[0].ppid() == int(after["executors"]["1"])  # the new executor's
    # and a kill after another executor was SIGKILLed leaves nothing behind
    os.kill(int(after["executors"]["0"]), signal.SIGKILL)
    proc = run_cli(heron_home, "kill", "local", name)
    assert proc.returncode == 0, proc.stderr
    assert LocalScheduler.topology_processes(tid) == []
