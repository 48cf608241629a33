"""A real Slurm cluster on this machine (scripts/slurm_cluster.sh), as a session fixture.

`slurm_cluster` runs `scripts/slurm_cluster.sh up` once per session and `down` at the end. It
yields a `SlurmCluster`: the `export KEY=VALUE` lines `up` printed, as a dict, plus `env`
(this process's environment with them applied, for subprocesses such as sbatch or the CLI)
and helpers to take a node down and bring it back. It skips, with the reason, on a machine
that cannot host the cluster: not root, no network namespaces or bridges, no UTS namespaces,
or Slurm not installable (the script's exit status 3).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "slurm_cluster.sh"
EXIT_UNSUPPORTED = 3   # scripts/slurm_cluster.sh: this machine cannot host the cluster
UP_TIMEOUT = 600       # includes apt-get install of slurm-wlm and munge on a fresh machine


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def unsupported_reason() -> str | None:
    """Why this machine cannot build the cluster, or None if it can (by trying, not guessing)."""
    if os.geteuid() != 0:
        return f"the Slurm cluster needs root (namespaces, a bridge, daemons); running as uid {os.geteuid()}"
    probe = f"hpyprobe{uuid.uuid4().hex[:6]}"   # <= 15 characters: a valid link name too
    try:
        r = _run(["ip", "netns", "add", probe])
    except FileNotFoundError:
        return "no `ip` command (iproute2) to create network namespaces"
    if r.returncode != 0:
        return f"cannot create a network namespace (ip netns add {probe}): {r.stderr.strip()}"
    _run(["ip", "netns", "del", probe])
    r = _run(["ip", "link", "add", probe, "type", "bridge"])
    if r.returncode != 0:
        return f"cannot create a bridge (ip link add {probe} type bridge): {r.stderr.strip()}"
    _run(["ip", "link", "del", probe])
    r = _run(["unshare", "--uts", "--mount", "true"])
    if r.returncode != 0:
        return f"cannot create UTS/mount namespaces (unshare --uts --mount true): {r.stderr.strip()}"
    return None


def parse_exports(text: str) -> dict[str, str]:
    """`export KEY=VALUE` lines (VALUE shell-quoted when it needs it) into a dict."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        words = shlex.split(line)
        if len(words) != 2 or words[0] != "export" or "=" not in words[1]:
            raise ValueError(f"{SCRIPT} up: expected only `export KEY=VALUE` lines on stdout, found {line!r}")
        key, value = words[1].split("=", 1)
        out[key] = value
    return out


class SlurmCluster(dict[str, str]):
    """The exports of `slurm_cluster.sh up` (HERON_PY_ZK, SLURM_CONF, HERON_PY_SLURM_NODES, ...)."""

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, **self}

    @property
    def nodes(self) -> list[str]:
        return self["HERON_PY_SLURM_NODES"].split(",")

    @property
    def node_addrs(self) -> dict[str, str]:
        return dict(pair.split("=", 1) for pair in self["HERON_PY_SLURM_NODE_ADDRS"].split(","))

    def script(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run slurm_cluster.sh with these arguments; a failure raises with its stderr."""
        r = subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=self.env)
        if r.returncode != 0:
            raise RuntimeError(f"{SCRIPT} {' '.join(args)} exited {r.returncode}:\n{r.stderr}")
        return r

    def node_down(self, name: str) -> None:
        self.script("node-down", name)

    def node_up(self, name: str) -> None:
        self.script("node-up", name)

    def node_state(self, name: str) -> str:
        """sinfo's long state of one node ('idle', 'down*', 'idle*' = not responding, ...)."""
        r = subprocess.run(["sinfo", "-h", "-n", name, "-o", "%T"], capture_output=True, text=True, timeout=30,
                           env=self.env)
        if r.returncode != 0:
            raise RuntimeError(f"sinfo -n {name} exited {r.returncode}: {r.stderr.strip()}")
        return r.stdout.strip()

    def wait_quiet(self, timeout: float = 90.0) -> None:
        """Wait until no job is queued or running and every node is idle.

        The cluster is shared by the session's tests: a topology another test killed ends its
        jobs on its own time (scancel, then KillWait before SIGKILL, then the epilog), so a test
        that needs idle nodes waits for them rather than assuming them."""
        deadline = time.monotonic() + timeout
        while True:
            q = subprocess.run(["squeue", "-h", "-o", "%i %j %T %N"], capture_output=True, text=True,
                               timeout=30, env=self.env)
            states = {n: self.node_state(n) for n in self.nodes}
            if q.returncode == 0 and not q.stdout.strip() and all(s == "idle" for s in states.values()):
                return
            if time.monotonic() > deadline:
                pytest.fail(f"the Slurm cluster did not become idle within {timeout:g} s: node states {states}; "
                            f"squeue (exit {q.returncode}):\n{q.stdout}{q.stderr}")
            time.sleep(0.5)


@pytest.fixture(scope="session")
def slurm_cluster():
    """The 4-node Slurm cluster with ZooKeeper, for the whole session; removed at the end."""
    reason = unsupported_reason()
    if reason:
        pytest.skip(reason)
    env = {**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin"}
    try:
        r = subprocess.run([str(SCRIPT), "up"], capture_output=True, text=True, timeout=UP_TIMEOUT, env=env)
    except subprocess.TimeoutExpired as e:
        subprocess.run([str(SCRIPT), "down"], capture_output=True, timeout=120, env=env)
        pytest.fail(f"{SCRIPT} up did not finish within {UP_TIMEOUT} s; stderr so far:\n{e.stderr}")
    try:
        if r.returncode == EXIT_UNSUPPORTED:
            pytest.skip(f"{SCRIPT} up: this machine cannot host the cluster:\n{r.stderr.strip()[-2000:]}")
        if r.returncode != 0:
            pytest.fail(f"{SCRIPT} up exited {r.returncode}; stderr:\n{r.stderr[-6000:]}")
        cluster = SlurmCluster(parse_exports(r.stdout))
        # one heron-py installation: one ZooKeeper credential for every test's home (the
        # cluster's ZooKeeper root is shared by the session's tests, as by a site's users)
        auth_dir = tempfile.mkdtemp(prefix="heron-py-slurm-auth-")
        cluster["HERON_PY_ZK_AUTH_FILE"] = os.path.join(auth_dir, "zk.auth")
        yield cluster
    finally:
        d = subprocess.run([str(SCRIPT), "down"], capture_output=True, text=True, timeout=120, env=env)
        if d.returncode != 0:
            # not a test failure, but the machine is left dirty: say so where it will be seen
            print(f"{SCRIPT} down exited {d.returncode}:\n{d.stderr}")
