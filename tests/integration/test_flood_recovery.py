"""Recovery under a flood (issue 34, item 5, test (c)): 64 idle pre-auth connections kept on
stream manager 0's port and 2,000 idle HTTP connections kept on the master, every process of
the topology under ``ulimit -n 1024``; then kill -9 of an instance and of stream manager 1:
both register again within 10 s (a full set of handshake slots evicts the oldest pending
connection; the HTTP endpoints cap their connections, so the master's descriptors are not used
up), and every sentence is acked once."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from heron_py.state import LocalFsStateManager
from heron_py.testing.local import kill_local, read_capture
from tests.integration.test_reliability import _all_acked, _check_exact, _start
from tests.support import wait_for as _wait

pytestmark = pytest.mark.integration
NAME = "rwc_flood"

# a separate process (its own descriptor limit): keeps N idle connections open to each target,
# opening a new one whenever one is closed, until it is killed
FLOOD = textwrap.dedent("""
    import resource, socket, sys, time
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    targets = [(int(p), int(n)) for p, n in (a.split(":") for a in sys.argv[1:])]
    held = {p: [] for p, _ in targets}
    opened = 0
    while True:
        for port, n in targets:
            alive = []
            for s in held[port]:
                try:
                    s.setblocking(False)
                    if s.recv(1, socket.MSG_PEEK) == b"":
                        s.close()
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    s.close()
                    continue
                alive.append(s)
            while len(alive) < n:
                try:
                    alive.append(socket.create_connection(("127.0.0.1", port), timeout=1))
                    opened += 1
                except OSError:
                    break
            held[port] = alive
        print(opened, flush=True)
        time.sleep(0.2)
""")


def test_kills_recover_within_10_s_under_a_connection_flood(heron_home):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))  # inherited by every process of the topology
    try:
        # 30 s of input at 200 sentences/s: the kills land well inside it (asserted below) even
        # when the flood's 2,064 connections take a loaded machine 15 s and more to open (CI saw
        # the input done before the kills at 10 s of input, and the flood not open in 15 s)
        _start(heron_home, NAME, split_delay_ms=1.0, rate=200)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    state = LocalFsStateManager(heron_home)
    flood = None
    try:
        _wait(lambda: len(read_capture(heron_home / "capture" / NAME, ["count"])["count"]) > 500, 30,
              "the run to get going")
        es = state.get_execution_state(NAME)
        sm0_port = int(es["stmgrs"]["0"]["port"])
        http_port = state.get_tmanager_location(NAME).http_port
        flood = subprocess.Popen([sys.executable, "-c", FLOOD, f"{sm0_port}:64", f"{http_port}:2000"],
                                 stdout=subprocess.PIPE, text=True)
        # the flood is in place once its first round made every connection (it prints how many it
        # opened after each round); a fixed 3 s sleep waited longer than that takes
        opened = [0]

        def read_flood() -> None:
            for line in flood.stdout or ():
                opened[0] = int(line)

        threading.Thread(target=read_flood, daemon=True).start()
        _wait(lambda: opened[0] >= 64 + 2000, 25, "the flood's 2,064 connections")
        assert not _all_acked(heron_home, NAME), "the run ended before the kills: the test proves nothing"
        packing = state.get_packing_plan(NAME)
        victim = next(t.task_id for t in packing.tasks_in(1) if t.component == "split")
        old_task_pid = int(es["instances"][str(victim)]["pid"])
        old_sm_pid = int(es["stmgrs"]["1"]["pid"])
        killed_at = time.monotonic()
        os.kill(old_task_pid, signal.SIGKILL)
        os.kill(old_sm_pid, signal.SIGKILL)

        def back() -> bool:
            now = state.get_execution_state(NAME) or {}
            sm = now.get("stmgrs", {}).get("1", {})
            inst = now.get("instances", {}).get(str(victim), {})
            return sm.get("pid") not in (None, old_sm_pid) and inst.get("pid") not in (None, old_task_pid) \
                and bool(inst.get("ready"))

        _wait(back, 10, "stream manager 1 and the killed instance registered again within 10 s")
        took = time.monotonic() - killed_at
        print(f"both registered again {took:.1f} s after the kill, under the flood")
        assert flood.poll() is None, "the flood stopped: the test proves nothing"
        _wait(lambda: _all_acked(heron_home, NAME), 90, "every sentence acked")
        time.sleep(1.5)
        _check_exact(heron_home, NAME)
    finally:
        if flood is not None:
            flood.kill()
            flood.wait()
        kill_local(heron_home, NAME)
