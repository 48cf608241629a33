"""heron_py/common/alive.py: the file a process touches for its executor's probe, and the stop of
a process whose executor is gone (the integration test in tests/integration/test_liveness.py
kills a real executor)."""

import asyncio
import logging
import os
import subprocess
import sys

import pytest

from heron_py.common import alive


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_silent_for_counts_from_the_last_touch_or_the_start():
    assert alive.silent_for(None, started_at=100.0, now=106.5) == 6.5
    assert alive.silent_for(103.0, started_at=100.0, now=106.5) == 3.5
    # a file older than the process (left by the one it replaced) counts from the start
    assert alive.silent_for(90.0, started_at=100.0, now=101.0) == 1.0
    assert alive.silent_for(None, started_at=100.0, now=99.0) == 0.0


@pytest.mark.asyncio
async def test_beat_touches_the_file_and_stops_once_when_the_executor_is_gone(tmp_path, monkeypatch, caplog):
    path = tmp_path / "alive"
    gone = _dead_pid()
    monkeypatch.setenv(alive.EXECUTOR_ENV, str(gone))
    calls: list[int] = []
    with caplog.at_level(logging.WARNING, logger="heron_py.alive"):
        await asyncio.wait_for(alive.beat(str(path), every_s=0.01, on_orphaned=lambda: calls.append(1)), 5)
    assert path.exists()
    assert calls == [1]
    assert caplog.messages == [
        f"the executor (pid {gone}) is gone: stopping, so that the container is relaunched whole"]


@pytest.mark.asyncio
async def test_beat_goes_on_while_the_executor_lives(tmp_path, monkeypatch):
    path = tmp_path / "alive"
    monkeypatch.setenv(alive.EXECUTOR_ENV, str(os.getpid()))
    calls: list[int] = []
    task = asyncio.ensure_future(alive.beat(str(path), every_s=0.01, on_orphaned=lambda: calls.append(1)))
    await asyncio.sleep(0.1)
    assert not task.done() and calls == []
    first = path.stat().st_mtime_ns
    os.utime(path, ns=(0, 0))
    await asyncio.sleep(0.05)
    assert path.stat().st_mtime_ns > 0  # touched again
    assert first > 0
    task.cancel()


@pytest.mark.asyncio
async def test_beat_without_a_file_returns_at_once(monkeypatch):
    monkeypatch.delenv(alive.ALIVE_ENV, raising=False)
    await asyncio.wait_for(alive.beat(), 1)
