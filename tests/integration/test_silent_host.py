"""A host that vanishes without FIN or RST (issue 34, acceptance (b)).

The whole topology runs in a network namespace of its own (its loopback is private), so
iptables rules there can make container 1 silent as a dead host is: every TCP packet to or from
the sockets of container 1's daemons is dropped, nothing is refused (a REJECT would send an
RST), and the kernel's FIN when those processes later die is dropped too. This is the
forwarding proxy of the issue, done by the kernel: the peers' sockets stay open and their
writes go unanswered. Before the cut, container 1's slow split task makes its stream manager
announce backpressure, which pauses the spout in container 0.

Expected: the master asks for container 1's relaunch within lost-after + 5 s of the cut
(heartbeat age, not connection presence); stream manager 0 drops its silent link (the
heartbeat timeout, or the new plan moving the peer, whichever comes first), which clears the
backpressure container 1 announced, so the spout in container 0 emits again.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.state import LocalFsStateManager
from heron_py.testing.local import complete_lines
from tests.conftest import EXAMPLES
from tests.netns import blackhole, network_namespace, run
from tests.support import wait_for as _wait

pytestmark = pytest.mark.integration

LOST_AFTER_S = 3


@pytest.fixture
def netns() -> Iterator[str]:
    with network_namespace("hpysil", tools=("ip", "iptables", "ss")) as name:
        yield name


def _cli(ns: str, home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HERON_PY_HOME": str(home)}
    return subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-m", "heron_py.cli.main", *args], env=env,
                          text=True, capture_output=True, timeout=timeout)


def _tcp_ports_of(ns: str, pids: set[int]) -> set[int]:
    """The local ports of every TCP socket (listening or connected) the processes hold."""
    out = run("ip", "netns", "exec", ns, "ss", "-tanpH").stdout
    ports = set()
    for line in out.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            local = line.split()[3]
            ports.add(int(local.rsplit(":", 1)[1]))
    return ports


def _blackhole(ns: str, ports: set[int]) -> None:
    for port in sorted(ports):  # a dead host answers nothing at all
        blackhole(ns, port)


def _logs(home: Path, name: str, pattern: str) -> str:
    return "".join(f.read_text(errors="replace") for f in TopologyPaths.of(name, home).logs.glob(pattern))


def _emitted(home: Path, name: str) -> int:
    """The spout's emit count in container 0's latest metrics line (the metrics manager's file sink)."""
    path = TopologyPaths.of(name, home).logs / "container-0" / "metrics.jsonl"
    if not path.exists():
        return 0
    lines = complete_lines(path)
    for line in reversed(lines):
        for r in json.loads(line).get("reports", []):
            if r.get("kind") == "instance" and r.get("component") == "fast":
                return sum(v for k, v in r["counters"].items() if k.startswith("__emit-count/"))
    return 0


def _stalled(home: Path, name: str) -> int:
    before = _emitted(home, name)
    time.sleep(2.5)  # more than two metrics intervals
    after = _emitted(home, name)
    return after if after == before else 0


def test_a_host_gone_silent_without_fin_or_rst_is_relaunched_and_its_backpressure_cleared(heron_home, netns):
    name = "silent_host"
    argv = ["submit", "local", "--name", name,
            "--config-property", f"heron.tmanager.container.lost.secs={LOST_AFTER_S}",
            "--config-property", "topology.metrics.export.interval.secs=1",
            # one spout (container 0) into one slow bolt (container 1): container 1's stream
            # manager goes above its high watermark and pauses the spout in container 0
            str(EXAMPLES / "slow_bolt.py"), "--spouts", "1", "--bolts", "1", "--payload", "10000",
            "--sleep-ms", "2"]
    sub = _cli(netns, heron_home, *argv)
    assert sub.returncode == 0, sub.stdout + sub.stderr
    state = LocalFsStateManager(heron_home)
    try:
        packing = state.get_packing_plan(name)
        assert packing is not None
        in0 = {t.component for t in packing.tasks_in(0)}
        in1 = {t.component for t in packing.tasks_in(1)}
        assert (in0, in1) == ({"fast"}, {"slow"}), (in0, in1)
        _wait(lambda: "above the high watermark" in _logs(heron_home, name, "container-1/stmgr.log"), 40,
              "container 1's stream manager to announce backpressure")
        _wait(lambda: "paused" in _logs(heron_home, name, "container-0/stmgr.log"), 20,
              "stream manager 0 to pause its spout for container 1's backpressure")
        _wait(lambda: _emitted(heron_home, name) > 0, 20, "the spout's first metrics report")
        # paused: the spout's count standing still across two reports shows it; backpressure
        # that toggles fast may never hold it that long, and the cut comes anyway
        deadline = time.monotonic() + 15
        while not _stalled(heron_home, name) and time.monotonic() < deadline:
            pass
        es = state.get_execution_state(name)
        paths = TopologyPaths.of(name, heron_home)
        pids = {int(es["stmgrs"]["1"]["pid"]),
                int(json.loads((paths.container(1) / "metricsmgr.json").read_text())["pid"])}
        ports = _tcp_ports_of(netns, pids)
        assert ports, f"no TCP sockets of container 1's daemons {pids}"
        _blackhole(netns, ports)
        cut_at = time.monotonic()
        emitted_at_cut = _emitted(heron_home, name)

        wanted = (f"container 1 has had no stream manager for {LOST_AFTER_S} s; asking the scheduler to "
                  f"relaunch it")
        _wait(lambda: wanted in _logs(heron_home, name, "container-0/tmanager.log"), LOST_AFTER_S + 5 + 10,
              "the master to ask for container 1's relaunch")
        requested_s = time.monotonic() - cut_at
        assert requested_s <= LOST_AFTER_S + 5, f"relaunch requested {requested_s:.1f} s after the cut"

        # a new stream manager registers for container 1, and stream manager 0 lets go of the
        # silent one (its heartbeat timeout, or the new plan moving the peer)
        def new_stmgr() -> bool:
            sm = ((state.get_execution_state(name) or {}).get("stmgrs") or {}).get("1")
            return sm is not None and int(sm["pid"]) not in pids
        _wait(new_stmgr, 30, "a new stream manager of container 1 to register")
        def let_go() -> bool:
            log = _logs(heron_home, name, "container-0/stmgr.log")
            # a second connection to stream manager 1 is to the new one (the first was before the cut)
            return "sent nothing for" in log or log.count("connected to stream manager 1 at") >= 2
        _wait(let_go, 30, "stream manager 0 to drop the silent link or connect to the new peer")

        # the spout runs again: its emit count passes where it stood at the cut by a wide margin.
        # (Its gateway once handed a spout's whole output to the connection in one loop turn,
        # 800 MB in a second, which then took longer than this wait to drain: fixed in
        # instance/gateway.py and tested in tests/unit/instance/test_gateway.py.)
        _wait(lambda: _emitted(heron_home, name) > emitted_at_cut + 2000, 60,
              f"the spout in container 0 to resume (emitted {emitted_at_cut} at the cut)")
        resumed_s = time.monotonic() - cut_at
        print(f"cut {len(ports)} TCP ports of pids {sorted(pids)}; relaunch requested {requested_s:.1f} s after "
              f"the cut (limit {LOST_AFTER_S + 5} s); spout resumed by {resumed_s:.1f} s (emitted {emitted_at_cut} "
              f"at the cut, {_emitted(heron_home, name)} now)")
    finally:
        _cli(netns, heron_home, "kill", "local", name)
