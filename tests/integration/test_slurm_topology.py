"""heron-py on a real Slurm cluster (scripts/slurm_cluster.sh: 4 nodes, each its own network
namespace, hostname and address): word count across 3 nodes with exact counts, its clique on
the bridge addresses, the HTTP API token off loopback, status and kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import Counter

import psutil
import pytest
import wc_common

from heron_py.common.handshake import http_token
from heron_py.testing import run_local
from heron_py.testing.local import kill_local
from tests.conftest import EXAMPLES

pytestmark = [pytest.mark.integration, pytest.mark.slurm]

N = 2000


def _cli(cluster, home, *args, timeout=120):
    env = {**cluster.env, "HERON_PY_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "heron_py.cli.main", *args], env=env, text=True,
                          capture_output=True, timeout=timeout)


def _status(cluster, home, name):
    p = _cli(cluster, home, "status", "slurm", name, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_word_count_on_three_slurm_nodes(slurm_cluster, tmp_path):
    cluster = slurm_cluster
    home = tmp_path / "home"
    expected = wc_common.expected_counts(N)
    total = sum(expected.values())
    t0 = time.monotonic()
    run = run_local(EXAMPLES / "word_count.py", ["--sentences", str(N)], home=home, containers=3,
                    capture=["count"], until=lambda r: len(r["count"]) >= total, timeout=180,
                    cluster="slurm", env=cluster, keep_running=True, submit_args=["--wait", "120"])
    print(f"submitted to Slurm and counted {total} words in {time.monotonic() - t0:.1f} s")
    try:
        assert Counter(v[0] for v in run.values("count")) == expected

        doc = _status(cluster, home, run.name)
        # one container per node: three different nodes, each the job's node
        placement = {p["container"]: p for p in doc["placement"]}
        assert sorted(placement) == [0, 1, 2] and all(p["state"] == "running" for p in placement.values())
        nodes = {p["where"] for p in placement.values()}
        assert len(nodes) == 3 and nodes <= set(cluster.nodes)
        addrs = cluster.node_addrs
        own_netns = os.readlink("/proc/self/ns/net")
        netns = set()
        for c, sm in doc["stmgrs"].items():
            node = placement[int(c)]["where"]
            # the stream manager advertises its node's bridge address, and runs in that node's namespace
            assert sm["host"] == addrs[node], (c, sm, node)
            ns = os.readlink(f"/proc/{sm['pid']}/ns/net")
            assert ns != own_netns
            netns.add(ns)
            # the clique: its TCP connections to the other stream managers are on bridge addresses
            peers = {conn.raddr.ip for conn in psutil.Process(sm["pid"]).net_connections("tcp")
                     if conn.raddr and conn.status == psutil.CONN_ESTABLISHED}
            others = {s["host"] for k, s in doc["stmgrs"].items() if k != c}
            assert others <= peers | {sm["host"]}, (c, peers, others)
        assert len(netns) == 3

        # the HTTP API is off loopback: 401 without the topology's token, 200 with it
        tm = doc["tmanager"]
        url = f"http://{tm['host']}:{tm['http_port']}/topologies/execution_state"
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url, timeout=5)
        assert e.value.code == 401
        secret = (home / "topologies" / run.name / "container-0" / "secret").read_bytes()
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {http_token(secret)}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            assert json.loads(r.read())["result"]["topology"] == run.name

        # each container's log is on the shared home, with the job's own output
        logs = home / "topologies" / run.name / "logs"
        for c in range(3):
            outs = list((logs / f"container-{c}").glob("slurm-*.out"))
            assert outs and f"heron-py container {c} of word_count on {placement[c]['where']}" in outs[0].read_text()
        listed = _cli(cluster, home, "list", "slurm")
        assert listed.stdout.split() == [run.name]
    finally:
        kill_local(home, run.name, cluster="slurm", env=cluster)
    # kill cancelled every job: Slurm no longer knows them
    q = subprocess.run(["squeue", "-h", "-n", ",".join(f"heronpy-{run.name}-{c}" for c in range(3))],
                       capture_output=True, text=True, env=cluster.env, timeout=30)
    assert q.stdout.strip() == ""
