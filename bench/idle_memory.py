"""PSS of an idle word count, per process and in all: the memory target of issue 19 (whole
topology <= 200 MB, instance <= 25 MB).

    python bench/idle_memory.py [--wait 12] [--reps 1]

Submits bench/wc_topology.py (2 containers, 5 tasks) on the local scheduler with 1,000
sentences, waits until they are counted and then --wait seconds, and reads the PSS (shared
pages divided among the processes that map them) of every process of the topology: the
executors, the fork servers, the master, the metrics and stream managers, and the instances.

Each rep measures the topology twice: as bench/run.py runs it (only the spout imports the
workload's module, which builds its 11 MB sentence pool) and with "pool-in-every-task" (each
bolt imports it too, as every task did when the issue's target was set).
"""

from __future__ import annotations

import argparse
import collections
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import Sampler, _kill, _submit, count_progress  # type: ignore[import-not-found]

from heron_py.scheduler.local import LocalScheduler


def _kind(p: psutil.Process) -> str:
    """The process's kind: executor, fork server, topology_master, metrics_manager, stmgr, instance."""
    role = Sampler._role(p)
    if role.startswith("other"):
        return "fork server" if "zygote" in " ".join(p.cmdline()) else "other"
    if role.startswith("heron_py.scheduler.executor"):
        return "executor"
    return role.split(" ")[0]


def measure(wait_s: float, pool_in_every_task: bool) -> dict[str, list[float]]:
    home = Path(tempfile.mkdtemp(prefix="heron-idle-mem-"))
    out = Path(tempfile.mkdtemp(prefix="wc-", dir=home))
    env, tid = _submit(home, "wc_topology.py", ["1000", str(out), "off",
                                                 *(["pool-in-every-task"] if pool_in_every_task else [])])
    try:
        deadline = time.monotonic() + 60
        while sum(int(c[0]) for c in count_progress(out)) < 10_000:
            if time.monotonic() > deadline:
                raise SystemExit("idle_memory: the 1,000 sentences were not counted within 60 s")
            time.sleep(0.2)
        time.sleep(wait_s)
        pss: dict[str, list[float]] = collections.defaultdict(list)
        for p in LocalScheduler.topology_processes(tid):
            try:
                pss[_kind(p)].append(p.memory_full_info().pss / 2**20)
            except psutil.Error:
                continue
        return pss
    finally:
        _kill(env, "bench_wc")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--wait", type=float, default=12.0)
    ap.add_argument("--reps", type=int, default=1)
    a = ap.parse_args()
    for rep in range(a.reps):
        for everywhere in (False, True):
            pss = measure(a.wait, everywhere)
            n, total = sum(len(v) for v in pss.values()), sum(sum(v) for v in pss.values())
            pool = "the pool in every task" if everywhere else "the pool in the spout only"
            print(f"rep {rep}: idle word count, {pool}, {n} processes, PSS {total:.1f} MB in all", flush=True)
            for kind, mbs in sorted(pss.items()):
                print(f"  {kind:24s} x{len(mbs)}  {', '.join(f'{m:.1f}' for m in sorted(mbs))} MB")


if __name__ == "__main__":
    main()
