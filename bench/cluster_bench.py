"""Word count across hosts, in one run: 3 containers on the local scheduler against 3
containers on 3 Slurm nodes (network namespaces on a bridge, scripts/slurm_cluster.sh), with
TLS off and on, alternating, each as words/s and as a ratio to the local run.

    python bench/cluster_bench.py [--reps 3] [--sentences N]    # as root; brings the cluster up and down

It uses a running cluster when $HERON_PY_ZK and $SLURM_CONF are set (eval "$(scripts/slurm_cluster.sh up)").
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import tempfile
from pathlib import Path

from run import ROOT, Where, ours, plain  # type: ignore[import-not-found]

SCRIPT = ROOT / "scripts" / "slurm_cluster.sh"


def cluster_env() -> tuple[dict[str, str], bool]:
    """The cluster's exports, and whether this run brought it up (then it takes it down)."""
    if os.environ.get("HERON_PY_ZK") and os.environ.get("SLURM_CONF"):
        keys = ("HERON_PY_STATE_MANAGER", "HERON_PY_ZK", "HERON_PY_SLURM_PARTITION", "SLURM_CONF")
        return {k: os.environ[k] for k in keys if k in os.environ}, False
    p = subprocess.run([str(SCRIPT), "up"], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        raise SystemExit(f"bench: {SCRIPT} up failed ({p.returncode}):\n{p.stderr[-3000:]}")
    env = {}
    for line in p.stdout.splitlines():
        _, kv = shlex.split(line)
        k, v = kv.split("=", 1)
        env[k] = v
    return env, True


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=200_000)
    args = ap.parse_args()
    env, brought_up = cluster_env()
    home = Path(tempfile.mkdtemp(prefix="heron-cluster-bench-"))
    three = ("--containers", "3")
    sides = {
        "local, 3 containers": (Where("local", (), three), {}),
        "slurm, 3 nodes": (Where("slurm", tuple(env.items()), three), {}),
        "slurm, 3 nodes, TLS": (Where("slurm", tuple(env.items()), three), {"heron.network.tls.enabled": "true"}),
    }
    res: dict[str, list[float]] = {k: [] for k in sides}
    try:
        base = plain(args.sentences)["words_per_s"]
        for _ in range(args.reps):
            for name, (where, props) in sides.items():
                res[name].append(ours(args.sentences, False, home, props, where=where)["words_per_s"])
    finally:
        if brought_up:
            subprocess.run([str(SCRIPT), "down"], capture_output=True, timeout=120)
    local = statistics.median(res["local, 3 containers"])
    print(f"\nplain loop {base:,.0f} words/s; {args.sentences:,} sentences, {args.reps} runs each, alternating")
    for name, xs in res.items():
        m = statistics.median(xs)
        print(f"{name:<22} {m:>11,.0f} words/s = {m / local:.3f}x local ({m / base:.3f}x plain)  "
              f"(runs: {', '.join(f'{x:,.0f}' for x in xs)})")
    tls, plain_slurm = statistics.median(res["slurm, 3 nodes, TLS"]), statistics.median(res["slurm, 3 nodes"])
    print(f"TLS on / off on slurm: {tls / plain_slurm:.3f}")


if __name__ == "__main__":
    main()
