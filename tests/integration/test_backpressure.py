"""Backpressure on real processes (2 containers): a spout as fast as it can go into a bolt
that sleeps 2 ms per tuple, watermarks 4 MB / 2 MB. Memory stays bounded, nothing is lost,
the other container's spouts are paused too; with droptuples, drops are counted instead."""

import json
import os
import re
import subprocess
import sys
import time

import pytest

from heron_py.common.container_layout import TopologyPaths
from heron_py.scheduler.local import LocalScheduler
from heron_py.state import LocalFsStateManager
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES
from tests.integration.test_cli import cli

pytestmark = pytest.mark.integration

PAYLOAD = 10_000  # bytes per tuple, distinct per tuple: the byte bounds are real bounds
# The bound on all topology processes together (14: a supervisor, 2 executors, 2 fork servers, 2 stream
# managers, 2 metrics managers, 1 master, 4 tasks), in PSS (forked processes share pages, which
# RSS would count once per process): 25 MB each on average for an idle process with our modules
# loaded (17-30 MB measured: executors and fork servers 17-19, daemons 15-17, tasks 28-30),
# plus, per stream manager, 4 outbound connections at the 4 MB high watermark with as much
# again in kernel socket buffers, plus 1 MB + 1 MB of instance queues per task, plus 100 MB
# margin for allocator slack (freed memory that Python does not give back at once).
PROCESS_MB = 25
GROWTH_BOUND_MB = 2 * 4 * (4 + 4) + 4 * 2 + 100


def _pss_mb(topology_id):
    procs = LocalScheduler.topology_processes(topology_id)
    assert len(procs) == NUM_PROCESSES
    return sum(p.memory_full_info().pss for p in procs) / 2**20


NUM_PROCESSES = 14  # with the topology's supervisor (heron_py/scheduler/supervisor.py)
BOUND_MB = NUM_PROCESSES * PROCESS_MB + GROWTH_BOUND_MB


def _log_numbers(home, name, pattern, regex):
    out = {}
    for f in TopologyPaths.of(name, home).logs.glob(pattern):
        found = re.findall(regex, f.read_text())
        if found:
            out[f.name] = int(found[-1])
    return out


def _under_pressure(home, name, drops):
    """True once a stream manager logged its high watermark and (unless in droptuples mode, where
    spouts are never paused and the forwarder drops instead) the other one paused its spouts for
    it: the clique is in backpressure from here on."""
    logs = TopologyPaths.of(name, home).logs
    texts = [(logs / f"container-{c}" / "stmgr.log").read_text(errors="replace")
             if (logs / f"container-{c}" / "stmgr.log").exists() else "" for c in (0, 1)]
    return any("above the high watermark" in texts[c] and (drops or "paused local spouts" in texts[1 - c])
               for c in (0, 1))


def _run(home, specs, hold_s, max_wait_s=60):
    """Runs one slow_bolt topology per ``specs`` entry (name: (extra config properties, droptuples
    or not)) side by side until each clique has been in backpressure for ``hold_s`` seconds (the
    spouts run full speed into the bound all that time), sampling each topology's PSS every
    second; then deactivates them. A fixed run length wasted most of its time after the peak,
    which comes within seconds of the first watermark. Fails if backpressure never starts
    within ``max_wait_s``. Returns name: (baseline MB, peak MB, status JSON)."""
    state = LocalFsStateManager(home)
    ids = {}
    for name, (extra_props, _) in specs.items():
        props = ["--config-property", "topology.message.timeout.secs=120", *extra_props]
        cli(home, "submit", "local", "--name", name, *props, str(EXAMPLES / "slow_bolt.py"),
            "--payload", str(PAYLOAD), "--sleep-ms", "2")
        ids[name] = state.get_scheduler_location(name)["topology_id"]
    time.sleep(2)
    baseline = {name: _pss_mb(tid) for name, tid in ids.items()}
    peak = dict(baseline)
    start = time.monotonic()
    pressure_since = dict.fromkeys(specs)

    def held(name):
        since = pressure_since[name]
        return since is not None and time.monotonic() - since >= hold_s

    while not all(held(name) for name in specs):
        waiting = [name for name, since in pressure_since.items() if since is None]
        assert time.monotonic() - start < max_wait_s, f"{waiting}: no backpressure within {max_wait_s} s"
        time.sleep(1)
        for name, tid in ids.items():
            pss = _pss_mb(tid)
            if pss > peak[name]:
                peak[name] = pss
                since = pressure_since[name]
                print(f"{name}: PSS {pss:.0f} MB at {time.monotonic() - start:.0f} s, backpressure since "
                      f"{'-' if since is None else f'{since - start:.0f} s'}")
            if pressure_since[name] is None and _under_pressure(home, name, specs[name][1]):
                pressure_since[name] = time.monotonic()
    out = {}
    for name in specs:
        status = cli(home, "status", "local", name, "--json").stdout
        cli(home, "deactivate", "local", name)
        out[name] = (baseline[name], peak[name], status)
    return out


def _counts(home, name):
    emitted = _log_numbers(home, name, "container-*/fast-*.log", r"emitted (\d+) tuples")
    received = _log_numbers(home, name, "container-*/slow-*.log", r"received (\d+) tuples")
    return (sum(emitted.values()) if len(emitted) == 2 else None), sum(received.values())


def _dropped(home, name):
    metrics = json.loads(cli(home, "status", "local", name, "--json").stdout)["stmgr_metrics"]
    return sum(int(m.get("dropped_tuples", 0)) for m in metrics.values())


def _drain(home, name, with_drops=False, timeout=120):
    """Waits until every emitted tuple is accounted for (received, or dropped and counted);
    fails with the last figures if that does not happen within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        emitted, received = _counts(home, name)
        dropped = _dropped(home, name) if with_drops else 0
        if emitted is not None and emitted == received + dropped:
            return emitted, received, dropped
        if time.monotonic() > deadline:
            raise AssertionError(f"not drained in {timeout} s: emitted {emitted}, received {received}, "
                                 f"dropped {dropped}")
        time.sleep(1)


# first: the two runs below stay up (deactivated) until the module's end
def test_droptuples_bounds_memory_and_counts_every_drop(heron_home):
    name = "bp_drop"
    try:
        baseline, peak, _ = _run(
            heron_home, {name: (("--config-property", "topology.droptuples.upon.backpressure=true"), True)}, 10)[name]
        print(f"\n{name}: PSS {baseline:.0f} MB at start, peak {peak:.0f} MB (bound {BOUND_MB} MB)")
        assert peak < BOUND_MB
        emitted, received, dropped = _drain(heron_home, name, with_drops=True)
        print(f"{name}: emitted {emitted} = received {received} + dropped {dropped}")
        assert dropped > 0 and received > 0
    finally:
        kill_local(heron_home, name)


NAMES = {False: "bp", True: "bp_ack"}


@pytest.fixture(scope="module")
def pressured(tmp_path_factory):
    """Both runs (at most once, and not) side by side, in one home: each is its own topology
    with its own 14 processes and its own PSS bound, and their spouts sit paused most of the
    time, so running them together halves the wall time without sharing what is measured.
    The tests drain and check one each; the topologies are killed after both."""
    home = tmp_path_factory.mktemp("bp") / "heron-home"
    home.mkdir()
    specs = {NAMES[False]: ((), False),
             NAMES[True]: (("--config-property", "topology.reliability.mode=ATLEAST_ONCE"), False)}
    try:
        # 15 s of sustained backpressure: the peak is in by then, and over 5000 tuples got through
        yield home, _run(home, specs, 15)
    finally:
        # both at once (a kill waits seconds for its processes to stop); not kill_local: a name a
        # failed submit never started must not hide that failure
        kills = [subprocess.Popen([sys.executable, "-m", "heron_py.cli.main", "kill", "local", name],
                                  env={**os.environ, "HERON_PY_HOME": str(home)},
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for name in specs]
        for k in kills:
            k.wait(timeout=120)


@pytest.mark.parametrize("acking", [False, True])
def test_memory_bounded_nothing_lost_and_the_clique_pauses(pressured, acking):
    heron_home, runs = pressured
    name = NAMES[acking]
    baseline, peak, status = runs[name]
    print(f"\n{name}: PSS of all processes {baseline:.0f} MB at start, peak {peak:.0f} MB "
          f"(bound {BOUND_MB} MB)")
    assert peak < BOUND_MB
    emitted, received, _ = _drain(heron_home, name)
    print(f"{name}: emitted {emitted}, received {received}")
    assert emitted > 5000
    logs = TopologyPaths.of(name, heron_home).logs
    sm_logs = {c: (logs / f"container-{c}" / "stmgr.log").read_text() for c in (0, 1)}
    slow = [c for c in (0, 1) if "above the high watermark" in sm_logs[c]]
    assert slow, "no stream manager reached the high watermark"
    other = 1 - slow[0]
    assert f"stream manager {slow[0]} is in backpressure" in sm_logs[other]
    assert "paused local spouts" in sm_logs[other]
    metrics = json.loads(status)["stmgr_metrics"]
    assert all(int(m["time_spent_back_pressure_ms"]) > 0 for m in metrics.values())
    by_comp = metrics[str(slow[0])]["time_spent_back_pressure_by_compid_ms"]
    assert int(by_comp["slow"]) > 0  # the slow bolt's component is named as the cause
    if acking:
        spout_logs = "".join(f.read_text() for f in logs.glob("container-*/fast-*.log"))
        assert "timed_out=0" in spout_logs or "timed_out" not in spout_logs
        assert not re.search(r"timed_out=[1-9]", spout_logs)
