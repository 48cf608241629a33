"""The Slurm cluster of scripts/slurm_cluster.sh is real: 4 machines, each with its own
hostname, network namespace and address, running real Slurm jobs; and a node that dies is
seen dead by Slurm, and comes back."""

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slurm]

JOB_TIMEOUT = 60.0
# SlurmdTimeout is 20 s in the script; slurmctld pings every third of it, so DOWN comes within
# about 30 s. 60 s is the bound heron-py's scheduler can rely on.
DETECT_TIMEOUT = 60.0
IP = shutil.which("ip") or "/usr/sbin/ip"


def _sbatch(cluster, node: str, out: Path, tmp_path: Path) -> str:
    """Submit a one-line job pinned to NODE that writes what machine it ran on to OUT."""
    # written to a temporary name and renamed, so a reader never sees half a file
    cmd = (f"{{ echo hostname=$(hostname); echo netns=$(readlink /proc/self/ns/net); "
           f"echo addrs=$({IP} -4 -o addr show | awk '{{print $4}}' | tr '\\n' ' '); }} > {out}.tmp "
           f"&& mv {out}.tmp {out}")
    r = subprocess.run(["sbatch", "--parsable", "-w", node, "-p", cluster["HERON_PY_SLURM_PARTITION"],
                        "-J", f"hpy-probe-{node}", "-o", str(tmp_path / f"{node}.log"), "--wrap", cmd],
                       capture_output=True, text=True, timeout=30, env=cluster.env)
    assert r.returncode == 0, f"sbatch -w {node} exited {r.returncode}: {r.stderr.strip()}"
    return r.stdout.strip().split(";")[0]


def _wait_outputs(cluster, outs: dict[str, Path], jobs: dict[str, str]) -> dict[str, dict[str, str]]:
    deadline = time.monotonic() + JOB_TIMEOUT
    while not all(p.exists() for p in outs.values()):
        if time.monotonic() > deadline:
            missing = [n for n, p in outs.items() if not p.exists()]
            show = subprocess.run(["scontrol", "show", "job", *(jobs[n] for n in missing)], capture_output=True,
                                  text=True, timeout=30, env=cluster.env)
            pytest.fail(f"jobs on {missing} wrote no output within {JOB_TIMEOUT:g} s; scontrol show job:\n"
                        f"{show.stdout}{show.stderr}")
        time.sleep(0.2)
    return {n: dict(line.split("=", 1) for line in p.read_text().splitlines()) for n, p in outs.items()}


def test_jobs_run_on_four_distinct_machines(slurm_cluster, tmp_path):
    cluster = slurm_cluster
    nodes = cluster.nodes
    assert nodes == ["node1", "node2", "node3", "node4"], f"HERON_PY_SLURM_NODES: expected node1..4, found {nodes}"
    outs = {n: tmp_path / f"{n}.out" for n in nodes}
    t0 = time.monotonic()
    jobs = {n: _sbatch(cluster, n, outs[n], tmp_path) for n in nodes}
    seen = _wait_outputs(cluster, outs, jobs)
    print(f"4 jobs submitted and finished in {time.monotonic() - t0:.1f} s")

    own_netns = os.readlink("/proc/self/ns/net")
    hostnames = {n: s["hostname"] for n, s in seen.items()}
    assert hostnames == {n: n for n in nodes}, f"each job's hostname should be its node's name, found {hostnames}"
    netns = {n: s["netns"] for n, s in seen.items()}
    assert len(set(netns.values())) == 4, f"expected 4 different network namespaces, found {netns}"
    assert own_netns not in netns.values(), f"a job ran in the test's own network namespace {own_netns}: {netns}"
    for n, s in seen.items():
        addrs = {a.split("/")[0] for a in s["addrs"].split()}
        expected = cluster.node_addrs[n]
        assert expected in addrs, f"job on {n}: expected the address {expected} the script assigned, found {addrs}"
        assert addrs <= {expected, "127.0.0.1"}, f"job on {n}: unexpected addresses {addrs} (expected {expected})"


def _wait_state(cluster, node: str, done, timeout: float, what: str) -> tuple[float, str]:
    t0 = time.monotonic()
    states = []
    while True:
        state = cluster.node_state(node)
        if not states or states[-1] != state:
            states.append(state)
        if done(state):
            return time.monotonic() - t0, state
        if time.monotonic() - t0 > timeout:
            pytest.fail(f"{node}: expected {what} within {timeout:g} s, sinfo states seen: {states}")
        time.sleep(0.5)


def _down(state: str) -> bool:
    return state.startswith("down")


def _not_responding_or_down(state: str) -> bool:
    return state.endswith("*") or _down(state)


def _in_service(state: str) -> bool:
    return state in ("idle", "mixed", "allocated")


def test_node_down_is_seen_and_node_up_returns_it(slurm_cluster, tmp_path):
    cluster = slurm_cluster
    cluster.wait_quiet()   # the jobs of topologies other tests killed may still be ending
    assert cluster.node_state("node4") == "idle", "node4 should start idle"
    t0 = time.monotonic()
    cluster.node_down("node4")
    try:
        kill_s = time.monotonic() - t0
        nr_s, nr_state = _wait_state(cluster, "node4", _not_responding_or_down, DETECT_TIMEOUT, "not responding")
        down_s, down_state = _wait_state(cluster, "node4", _down, DETECT_TIMEOUT - nr_s, "DOWN")
        print(f"node-down node4 took {kill_s:.1f} s; sinfo showed '{nr_state}' after {kill_s + nr_s:.1f} s "
              f"and '{down_state}' after {kill_s + nr_s + down_s:.1f} s")
        others = {n: cluster.node_state(n) for n in ("node1", "node2", "node3")}
        assert all(s == "idle" for s in others.values()), f"only node4 went down, yet the others are {others}"
    finally:
        t1 = time.monotonic()
        cluster.node_up("node4")
    up_s, up_state = _wait_state(cluster, "node4", _in_service, DETECT_TIMEOUT, "back in service (idle)")
    print(f"node-up node4: in service ('{up_state}') {time.monotonic() - t1:.1f} s after node-up started "
          f"({up_s:.1f} s after it returned)")

    # and it runs jobs again, on the same machine
    out = tmp_path / "node4.out"
    job = _sbatch(cluster, "node4", out, tmp_path)
    seen = _wait_outputs(cluster, {"node4": out}, {"node4": job})["node4"]
    assert seen["hostname"] == "node4", f"the job after node-up ran on {seen['hostname']}, expected node4"
    assert cluster.node_addrs["node4"] in seen["addrs"], (
        f"the job after node-up on node4: expected address {cluster.node_addrs['node4']}, found {seen['addrs']}")
