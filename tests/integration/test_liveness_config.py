"""The heartbeats and the executor's probe as configured by the topology (issue 34): two
containers with ``heron_py.network.heartbeat.interval.secs`` 0.5 and ``.timeout.secs`` 2, and
``heron_py.executor.liveness.timeout.secs`` 6. Container 1's stream manager is frozen with
SIGSTOP (no FIN, no RST): the stream manager of container 0 drops its link to it after 2 s of
silence (the default would take 10 s), and container 1's executor kills the frozen process after
6 s (the default: 15 s)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.state import LocalFsStateManager
from heron_py.testing.local import kill_local, read_capture, run_local
from tests.conftest import EXAMPLES
from tests.support import wait_for as _wait

pytestmark = pytest.mark.integration

PROPERTIES = {
    "heron_py.network.heartbeat.interval.secs": "0.5",
    "heron_py.network.heartbeat.timeout.secs": "2",
    "heron_py.executor.liveness.timeout.secs": "6",
    "topology.max.spout.pending": "200",
}


def _logs(home: Path, name: str, pattern: str) -> str:
    return "".join(f.read_text(errors="replace") for f in TopologyPaths.of(name, home).logs.glob(pattern))


def _when(cond: object, timeout: float, what: str) -> float:
    """Seconds until ``cond()`` holds, polled every 50 ms (wait_for's 200 ms would blur the figure)."""
    started = time.monotonic()
    _wait(cond, timeout, what, every=0.05)  # type: ignore[arg-type]
    return time.monotonic() - started


NAME = "rwc_liveness_cfg"


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One topology for the module, going (tuples counted: the clique's links are up)."""
    home = tmp_path_factory.mktemp("liveness_cfg") / "heron-home"
    home.mkdir()
    run_local(EXAMPLES / "reliable_word_count.py",
              ["--sentences", "100000", "--timeout", "30", "--rate", "200", "--containers", "2"],
              home=home, name=NAME, capture=["count"], keep_running=True, properties=PROPERTIES)
    try:
        _wait(lambda: len(read_capture(home / "capture" / NAME, ["count"])["count"]) > 100, 30,
              "the run to get going")
        yield home
    finally:
        kill_local(home, NAME)


def test_healthy_idle_links_are_kept(running: Path) -> None:
    """Every link, idle or not, hears from its peer within the configured timeout: for 5 s (2.5
    timeouts) no daemon drops a link of a healthy peer."""
    time.sleep(5)
    lines = [line for line in _logs(running, NAME, "**/*.log").splitlines() if "sent nothing for" in line]
    assert lines == []


def test_a_frozen_stream_manager_is_dropped_and_killed_on_the_configured_timeouts(running: Path) -> None:
    state = LocalFsStateManager(running)
    es = state.get_execution_state(NAME)
    assert es is not None
    frozen = es["stmgrs"]["1"]
    frozen_pid, port = int(frozen["pid"]), int(frozen["port"])
    # the line of stream manager 0's link to the frozen one (the silence it names is measured)
    dropped = f"dropping connection: 127.0.0.1:{port} sent nothing for "
    assert dropped not in _logs(running, NAME, "container-0/**/stmgr.log")
    os.kill(frozen_pid, signal.SIGSTOP)
    try:
        took = _when(lambda: dropped in _logs(running, NAME, "container-0/**/stmgr.log"), 10,
                     "stream manager 0 to drop its link to the frozen stream manager 1")
        # silence is elapsed time, judged at ticks of 0.5 s: the abort comes 2 to 2.5 s after the last frame
        assert 1.5 <= took <= 4.0, f"link dropped {took:.1f} s after the freeze; configured 2 s"
        probe = f"stmgr (pid {frozen_pid}) stopped answering its liveness probe"
        killed = took + _when(lambda: probe in _logs(running, NAME, "**/*.log"), 12,
                              "the executor to kill the frozen stream manager")
        # the alive file is touched every second: 5 to 6.x s after the freeze, not 15 s
        assert 4.5 <= killed <= 9.0, f"killed {killed:.1f} s after the freeze; configured 6 s"
        print(f"link dropped {took:.1f} s and process killed {killed:.1f} s after the freeze")
    finally:
        try:
            os.kill(frozen_pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
