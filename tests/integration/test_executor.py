"""The executor as a scheduler starts it, on a host that cannot reach the state manager."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration


def test_an_executor_that_cannot_reach_zookeeper_says_so_in_its_log(tmp_path):
    # nothing listens on port 1: the node "cannot reach" ZooKeeper; the container's log (the
    # executor's output, slurm-JOBID.out on Slurm) says why, and the exit code says it failed
    p = subprocess.run([sys.executable, "-m", "heron_py.scheduler.executor", "--topology", "wc", "--container", "1",
                        "--home", str(tmp_path), "--host", "auto", "--state-manager", "zookeeper",
                        "--zk", "127.0.0.1:1"], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 2
    last = p.stdout.strip().splitlines()[-1]
    assert last.endswith(" ERROR executor[1] executor[1]: container 1 cannot start: ZooKeeper at 127.0.0.1:1 is not "
                         "reachable: no session within the connect timeout of 5 s (is the server running? state "
                         "manager zookeeper at 127.0.0.1:1/heron-py)"), last
