"""py-spy profile of every process of the shared word count while it runs saturated.

    python bench/profile.py [--acking] [--seconds 8] [--out DIR]
    python bench/profile.py --perf [--acking]      # Linux perf: C symbols, low overhead

Submits bench/wc_topology.py on the local scheduler with more sentences than the profile
lasts, waits for the run to warm up, then records every stream manager and instance process
at once with py-spy (100 samples/s, native frames off unless --native, which shows the compiled
hot-path modules' functions; idle samples left out) and prints per
process the share of samples per thread and the functions with the most samples (self and
inclusive). The raw collapsed stacks stay in DIR for flame graphs. py-spy comes from pip
(``pip install py-spy``); it needs ptrace, which root has.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import Sampler, _kill, _submit

from heron_py.scheduler.local import LocalScheduler


def summarize(path: Path, top: int = 12) -> str:
    self_c: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack:
            continue
        k = int(n)
        total += k
        frames = stack.split(";")
        threads[frames[0]] += k
        self_c[frames[-1]] += k
        for f in set(frames):
            incl[f] += k
    if not total:
        return "  (no samples)\n"
    out = [f"  samples {total}"]
    out += [f"  thread {100 * c / total:5.1f}%  {t[:90]}" for t, c in threads.most_common(4)]
    out.append("  self:")
    out += [f"    {100 * c / total:5.1f}%  {f[:130]}" for f, c in self_c.most_common(top)]
    out.append("  inclusive:")
    out += [f"    {100 * c / total:5.1f}%  {f[:130]}" for f, c in incl.most_common(top + 8)]
    return "\n".join(out) + "\n"


def perf_summary(data: Path, procs: dict[str, int], cpu: dict[str, str], top: int = 12) -> str:
    """Per process, its share of all samples and its own top symbols (``perf report`` by pid)."""
    rep = subprocess.run(["perf", "report", "-i", str(data), "--no-children", "--sort", "pid,dso,symbol",
                          "--stdio", "-g", "none"], check=True, capture_output=True, text=True).stdout
    rows: dict[int, list[str]] = collections.defaultdict(list)
    share: collections.Counter[int] = collections.Counter()
    for line in rep.splitlines():
        parts = line.split()
        if len(parts) < 4 or not parts[0].endswith("%") or ":" not in parts[1]:
            continue
        pid = int(parts[1].split(":")[0])
        pct = float(parts[0][:-1])
        share[pid] += pct
        if len(rows[pid]) < top:
            rest = parts[4:] if parts[3] in ("[.]", "[k]") else parts[3:]
            while rest and rest[-1] == "-":  # perf's empty columns
                rest.pop()
            dso, sym = parts[2], " ".join(rest)
            rows[pid].append(f"    {pct:5.2f}%  {sym[:90]}  ({dso})")
    out = []
    for role, pid in sorted(procs.items()):
        out.append(f"== {role}: CPU {cpu[role]}; {share[pid]:.1f}% of all samples")
        out += rows[pid] or ["    (no samples)"]
    return "\n".join(out)


def _thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (user + system) per thread id of ``pid``: what py-spy's samples cannot
    tell, time spent in C (the gateway's uvloop) as against time waiting."""
    try:
        return {t.id: t.user_time + t.system_time for t in psutil.Process(pid).threads()}
    except psutil.Error:
        return {}


def _cpu_delta(a: dict[int, float], b: dict[int, float], dt: float) -> str:
    """Per thread (in thread id order: the main thread first), the share of one core used."""
    shares = [f"{100 * (b[t] - a.get(t, 0.0)) / dt:.0f}%" for t in sorted(b)]
    return "threads " + " / ".join(shares) + " of a core"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--acking", action="store_true")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--warmup", type=float, default=6.0)
    ap.add_argument("--sentences", type=int, default=3_000_000)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--program", default="wc_topology.py",
                    help="the bench program to profile (streamlet_wc.py: the Streamlet word count)")
    ap.add_argument("--program-arg", action="append", default=[],
                    help="an argument after the program's own three (streamlet_wc.py's 'keyed')")
    ap.add_argument("--cpu-only", action="store_true", help="no py-spy: CPU per thread only (no sampling overhead)")
    ap.add_argument("--native", action="store_true",
                    help="py-spy --native: C frames too, where the compiled hot-path modules' functions show")
    ap.add_argument("--perf", action="store_true",
                    help="Linux perf instead of py-spy: C symbols only (CPython's, the compiled modules', the "
                         "kernel's), at 999 Hz, with far less overhead than py-spy --native")
    a = ap.parse_args()
    if a.perf and shutil.which("perf") is None:
        raise SystemExit("bench/profile.py --perf: the perf command was not found on PATH "
                         "(Debian: apt-get install linux-perf)")
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    home = Path(tempfile.mkdtemp(prefix="heron-prof-"))
    out = a.out or home / "profiles"
    out.mkdir(parents=True, exist_ok=True)
    wc_out = Path(tempfile.mkdtemp(prefix="wc-", dir=home))
    env, tid = _submit(home, a.program, [str(a.sentences), str(wc_out), "on" if a.acking else "off",
                                         *a.program_arg])
    try:
        time.sleep(a.warmup)
        procs = {}
        for p in LocalScheduler.topology_processes(tid):
            role = Sampler._role(p)
            if role.startswith(("instance", "stmgr")):
                procs[role] = p.pid
        if a.perf:
            before = {role: _thread_cpu(pid) for role, pid in procs.items()}
            t0 = time.monotonic()
            data = out / "perf.data"
            subprocess.run(["perf", "record", "-F", "999", "-o", str(data), "-p", ",".join(map(str, procs.values())),
                            "--", "sleep", str(a.seconds)], check=True, capture_output=True)
            dt = time.monotonic() - t0
            cpu = {role: _cpu_delta(before[role], _thread_cpu(pid), dt) for role, pid in procs.items()}
            print(perf_summary(data, procs, cpu))  # the finally below kills the topology
            return 0
        spies = []
        for role, pid in ([] if a.cpu_only else procs.items()):
            raw = out / f"{role.replace(' ', '_')}.txt"
            spies.append((role, raw, subprocess.Popen(
                [spy, "record", "-p", str(pid), "-d", str(int(a.seconds)), "-r", "100", "-f", "raw", "-o", str(raw),
                 *(["--native"] if a.native else [])],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)))
        before = {role: _thread_cpu(pid) for role, pid in procs.items()}
        t0 = time.monotonic()
        for _, _, s in spies:
            s.wait()
        if a.cpu_only:
            time.sleep(a.seconds)
        dt = time.monotonic() - t0
        cpu = {role: _cpu_delta(before[role], _thread_cpu(pid), dt) for role, pid in procs.items()}
    finally:
        _kill(env, env["HERON_PY_BENCH_TOPOLOGY"])  # the program's own name (bench_wc, bench_latency)
    if a.cpu_only:
        for role in sorted(cpu):
            print(f"== {role}: CPU {cpu[role]}")
        return 0
    for role, raw, _ in sorted(spies):
        print(f"== {role}: CPU {cpu[role]}")
        print(summarize(raw) if raw.exists() else "  (py-spy wrote nothing)\n")
    print(f"raw stacks: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
