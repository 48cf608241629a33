"""One command, one run, on the shared workload (examples/wc_common.py, a copy of
../shared/bench/peers/wc_common.py: same sentences, same checksum):

* the plain-loop baseline, in this process;
* our word count on the local scheduler (2 containers, split par 2, count par 2, fields
  grouping) with acking off and on: words/s, ratio to the plain loop, peak RSS/PSS of all
  the topology's processes, and the checksum of the counts;
* with ``--peers``: bytewax with 2 processes and the PySpark RDD job, the shared peer
  scripts run unchanged on the same N, in a separate venv (bench/.venv-peers, created on
  first use);
* latency, measured as ../shared/bench/peers/bench_latency.py does (scheduled creation time
  carried by each sentence, paced source, p50/p90/p99/max over a window after warm-up):
  acking off at 10k sentences/s and at 50 % of the acking-off peak measured above, and
  acking on at 50 % of the acking-on peak (end to end and complete latency);
* RSS of every stream manager and instance over the 50 %-of-peak run (``--soak`` seconds,
  default 120): first and last sample, to show whether memory stays flat.

    python bench/run.py                 # the full run, under 10 minutes on 2 cores
    python bench/run.py --peers         # plus bytewax and PySpark
    python bench/run.py --quick         # CI smoke: small N, short latency runs, the Kafka pipeline

Exit status 1 if any checksum differs from the expected one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT.parent / "shared" / "bench" / "peers"
sys.path.insert(0, str(ROOT / "examples"))

import wc_common  # noqa: E402

from heron_py.scheduler.local import LocalScheduler  # noqa: E402
from heron_py.state import open_state  # noqa: E402
from heron_py.state.config import resolve  # noqa: E402

CLI = [sys.executable, "-m", "heron_py.cli.main"]
FINE, COARSE = 100_000, 1000


def hot_path() -> str:
    """How many hot-path modules this interpreter imports compiled: a source file touched after
    its module was built (in a checkout) makes every task run it as Python, and a run's figures
    would then not be the compiled engine's (``python -m heron_py.compiled`` names them)."""
    from heron_py.compiled import forms

    got = forms()
    pure = [m for m, how in got.items() if how == "pure"]
    return f"hot path {len(got) - len(pure)} of {len(got)} modules compiled" + (f" (pure: {', '.join(pure)})"
                                                                                  if pure else "")


def shared_plain_loop() -> Any:
    """The shared baseline's loop itself (../shared/bench/peers/bench_plain.py ``run_loop``: a
    defaultdict count), never a copy: a Counter here ran 1.65x slower and inflated every "x
    plain" figure. Without the shared folder (a checkout alone), its loop as written there."""
    if (PEERS / "bench_plain.py").is_file():
        import importlib.util

        spec = importlib.util.spec_from_file_location("bench_plain", PEERS / "bench_plain.py")
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules.setdefault("wc_common", wc_common)  # the same workload module (a verified copy)
        spec.loader.exec_module(mod)
        return mod.run_loop

    def run_loop(n: int) -> dict[str, int]:
        counts: defaultdict[str, int] = defaultdict(int)
        for s in wc_common.sentences(0, n):
            for w in s.split():
                counts[w] += 1
        return counts
    return run_loop


def plain(n: int) -> dict[str, Any]:
    loop = shared_plain_loop()
    t0 = time.perf_counter()
    d = loop(n)
    t = time.perf_counter() - t0
    return {"words_per_s": 10 * n / t, "t_run": t, "checksum": wc_common.checksum(dict(d))}


class Sampler:
    """Samples RSS/PSS of a topology's processes every 0.5 s in a thread: the peak of the sum,
    and per process (by command line role) the first and last RSS."""

    def __init__(self, topology_id: str) -> None:
        self.tid = topology_id
        self.peak_rss = self.peak_pss = 0.0
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    @staticmethod
    def _role(p: psutil.Process) -> str:
        cmd = p.cmdline()
        if "instance" in cmd:
            return f"instance {cmd[cmd.index('--component') + 1]}-{cmd[cmd.index('--task-id') + 1]}"
        if "stream_manager" in cmd:
            return f"stmgr {cmd[cmd.index('--container') + 1]}"
        for r in ("topology_master", "metrics_manager", "heron_py.scheduler.executor"):
            if r in cmd:
                return f"{r} {p.pid}"
        return f"other {p.pid}"

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = pss = 0
            for p in LocalScheduler.topology_processes(self.tid):
                try:
                    m = p.memory_full_info()
                    role = self._role(p)
                except psutil.Error:
                    continue
                rss += m.rss
                pss += m.pss
                self.first.setdefault(role, m.rss / 2**20)
                self.last[role] = m.rss / 2**20
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss / 2**20), max(self.peak_pss, pss / 2**20)
            self._stop.wait(0.5)

    def stop(self) -> None:
        self._stop.set()
        self._t.join()


@dataclass(frozen=True)
class Where:
    """Where a benchmark topology runs: the scheduler, extra environment (a Slurm cluster's
    HERON_PY_ZK...), extra submit arguments (--containers 3)."""

    cluster: str = "local"
    env: tuple[tuple[str, str], ...] = ()
    submit_args: tuple[str, ...] = ()


LOCAL = Where()


def _submit(home: Path, script: str, args: list[str], props: dict[str, str] | None = None,
            python: str = sys.executable, where: Where = LOCAL) -> tuple[dict[str, str], str]:
    # wc_common lives in examples/: on the submitter's PYTHONPATH, it ships in the package
    env = {**os.environ, **dict(where.env), "HERON_PY_HOME": str(home), "PYTHONPATH": str(ROOT / "examples")}
    extra = [a for k, v in (props or {}).items() for a in ("--config-property", f"{k}={v}")]
    cli = [python, *CLI[1:]]  # another interpreter runs another checkout (bench/ab.py --rev)
    # cwd: the interpreter must not import the tree it is started from (another checkout)
    p = subprocess.run([*cli, "submit", where.cluster, *where.submit_args, *extra, str(ROOT / "bench" / script),
                        *args], env=env, cwd=home, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"bench: submit of {script} failed:\n{p.stdout}\n{p.stderr}")
    name = p.stdout.split("'")[1]
    state = open_state(resolve(env=env, home=home), home)
    try:
        tid = str((state.get_scheduler_location(name) or {})["topology_id"])
    finally:
        state.close()
    env["HERON_PY_BENCH_CLUSTER"] = where.cluster
    env["HERON_PY_BENCH_TOPOLOGY"] = name  # the name the program gave it, for _kill
    return env, tid


def _kill(env: dict[str, str], name: str, python: str = sys.executable) -> None:
    cluster = env.get("HERON_PY_BENCH_CLUSTER", "local")
    subprocess.run([python, *CLI[1:], "kill", cluster, name], env=env, capture_output=True, cwd=env["HERON_PY_HOME"])


def count_progress(out: Path) -> list[list[str]]:
    """Each count task's "total last_update_time" line (wc_topology.py writes it every tick)."""
    return [f.read_text().split() for f in out.glob("count-*") if "." not in f.name]


class CpuMeter:
    """CPU seconds (user + system) of all of a topology's processes on this machine, summed:
    what a CPU-bound run costs. The processes are looked up once, at the first reading (a scan
    reads every process's environment, too much to repeat five times a second inside the run
    being measured), so take it once all of them run: when words are being counted."""

    def __init__(self, topology_id: str) -> None:
        self.tid = topology_id
        self._procs: list[psutil.Process] | None = None

    def total(self) -> float:
        return sum(self.by_role().values())

    def by_role(self) -> dict[str, float]:
        """CPU seconds per process role (an instance by component, a stream manager, the master,
        ...: Sampler._role with the task and pid left out, so that runs compare)."""
        if self._procs is None:
            self._procs = [(p, _role_kind(Sampler._role(p))) for p in LocalScheduler.topology_processes(self.tid)]
        out: dict[str, float] = {}
        for p, role in self._procs:
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            out[role] = out.get(role, 0.0) + t.user + t.system
        return out


def _role_kind(role: str) -> str:
    """'instance split-3' -> 'split', 'stmgr 0' -> 'stmgr', 'topology_master 123' -> 'topology_master'."""
    kind, _, rest = role.partition(" ")
    return rest.rsplit("-", 1)[0] if kind == "instance" else kind


def steady_cpu_us_per_word(samples: list[tuple[int, float]], words: int) -> float | None:
    """CPU per word counted between 10 % and 90 % of the run's words (start-up and the tail left
    out), from (words counted, CPU seconds) samples; None when too few samples fall there."""
    mid = [(w, c) for w, c in samples if 0.1 * words <= w <= 0.9 * words]
    if len(mid) < 2 or mid[-1][0] == mid[0][0]:
        return None
    return (mid[-1][1] - mid[0][1]) / (mid[-1][0] - mid[0][0]) * 1e6


def ours(n: int, acking: bool, home: Path, props: dict[str, str] | None = None,
         python: str = sys.executable, where: Where = LOCAL, program: str = "wc_topology.py",
         program_args: tuple[str, ...] = ()) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="wc-", dir=home))
    env, tid = _submit(home, program, [str(n), str(out), "on" if acking else "off", *program_args], props, python,
                       where)
    sampler = Sampler(tid)
    cpu = CpuMeter(tid)
    samples: list[tuple[int, float]] = []
    role_samples: list[tuple[int, dict[str, float]]] = []
    total = 0
    deadline = time.monotonic() + 600
    counts: list[list[str]] = []
    try:
        while time.monotonic() < deadline:
            time.sleep(0.2)
            counts = count_progress(out)
            total = sum(int(c[0]) for c in counts)
            if total:  # every process of the topology runs once words are counted
                roles = cpu.by_role()
                samples.append((total, sum(roles.values())))
                role_samples.append((total, roles))
            if total >= 10 * n:
                break
        start = min(float(f.read_text()) for f in out.glob("spout-*"))
        end = max(float(c[1]) for c in counts)
        # the counts files follow the totals by one tick
        merged: Counter[str] = Counter()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            merged = Counter()
            for f in out.glob("count-*.counts"):
                merged.update(json.loads(f.read_text()))
            if sum(merged.values()) == 10 * n:
                break
            time.sleep(0.2)
    finally:
        sampler.stop()
        _kill(env, "bench_wc", python)
    if total != 10 * n:
        raise SystemExit(f"bench: counted {total} words, expected {10 * n}")
    return {"words_per_s": 10 * n / (end - start), "t_run": end - start, "rss": sampler.peak_rss,
            "pss": sampler.peak_pss, "checksum": wc_common.checksum(dict(merged)),
            "cpu_us_per_word": steady_cpu_us_per_word(samples, 10 * n),
            "cpu_us_per_word_by_role": {
                r: steady_cpu_us_per_word([(w, roles.get(r, 0.0)) for w, roles in role_samples], 10 * n)
                for r in (role_samples[-1][1] if role_samples else {})}}


def _quantiles(fine: Counter[int], coarse: Counter[int], n: int, mx: float, qs: list[float]) -> list[float]:
    out: list[float] = []
    targets = [q * n for q in qs]
    cum = 0
    for k in sorted(fine):
        cum += fine[k]
        while len(out) < len(targets) and cum >= targets[len(out)]:
            out.append((k + 0.5) / FINE)
    for k in sorted(coarse):
        cum += coarse[k]
        while len(out) < len(targets) and cum >= targets[len(out)]:
            out.append((k + 0.5) / COARSE)
    while len(out) < len(targets):
        out.append(mx)
    return out


def _merge(paths: list[Path]) -> dict[str, Any]:
    fine: Counter[int] = Counter()
    coarse: Counter[int] = Counter()
    n, total, mx, s = 0, 0, 0.0, 0.0
    for p in paths:
        d = json.loads(p.read_text())
        fine.update({int(k): v for k, v in d["fine"].items()})
        coarse.update({int(k): v for k, v in d["coarse"].items()})
        n += d["n"]
        s += d["sum"]
        mx = max(mx, d["max"])
        total += d.get("total", 0)
    if not n:
        return {"n": 0}
    p50, p90, p99 = _quantiles(fine, coarse, n, mx, [0.5, 0.9, 0.99])
    return {"n": n, "p50_ms": p50 * 1e3, "p90_ms": p90 * 1e3, "p99_ms": p99 * 1e3, "max_ms": mx * 1e3,
            "mean_ms": s / n * 1e3}


def latency(rate: float, acking: bool, home: Path, warmup: float, window: float, soak: float,
            props: dict[str, str] | None = None) -> dict[str, Any]:
    out = Path(tempfile.mkdtemp(prefix="lat-", dir=home))
    env, tid = _submit(home, "latency_topology.py",
                       [str(rate), str(out), "on" if acking else "off", str(warmup), str(window)], props)
    sampler = Sampler(tid)
    try:
        # the spout's t0 is its first call; every task dumps its histogram after the window
        deadline = time.monotonic() + 60
        while not (out / "t0").exists():
            if time.monotonic() > deadline:
                raise SystemExit("bench: the latency spout never started")
            time.sleep(0.1)
        started = time.monotonic()
        need = 3 if acking else 2
        deadline = started + warmup + window + 30
        while len(list(out.glob("*.json"))) < need and time.monotonic() < deadline:
            time.sleep(0.2)
        rest = started + max(soak, warmup + window) - time.monotonic()
        if rest > 0:
            time.sleep(rest)
    finally:
        sampler.stop()
        _kill(env, "bench_latency")
    e2e = _merge(sorted(out.glob("count-*.json")))
    res: dict[str, Any] = {"rate": rate, "acking": acking, "e2e": e2e,
                           "achieved": e2e.get("n", 0) / 10 / window, "rss_first": sampler.first,
                           "rss_last": sampler.last, "soak_s": max(soak, warmup + window)}
    if acking:
        res["complete"] = _merge([out / "spout.json"]) if (out / "spout.json").exists() else {"n": 0}
    return res


PEER_PKGS = ["bytewax==0.21.1", "pyspark>=4.0", "psutil"]


def peers_python() -> str:
    venv = ROOT / "bench" / ".venv-peers"
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", *PEER_PKGS], check=True)
    return str(py)


def peer(py: str, script: str, args: list[str], n: int) -> dict[str, Any]:
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=py)
    p = subprocess.Popen([py, str(PEERS / script), "--sentences", str(n), *args], cwd=str(PEERS), env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak_rss = peak_pss = 0.0
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout or []), daemon=True)
    reader.start()
    while p.poll() is None:
        rss = pss = 0
        try:
            procs = [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            procs = []
        for q in procs:
            try:
                m = q.memory_full_info()
                rss += m.rss
                pss += m.pss
            except psutil.Error:
                pass
        peak_rss, peak_pss = max(peak_rss, rss / 2**20), max(peak_pss, pss / 2**20)
        time.sleep(0.2)
    reader.join()
    res = next((json.loads(line[7:]) for line in lines if line.startswith("RESULT ")), None)
    if res is None:
        raise SystemExit(f"bench: peer {script} {args} printed no RESULT:\n{''.join(lines[-30:])}")
    return {"words_per_s": 10 * n / res["t_run"], "t_run": res["t_run"], "rss": peak_rss, "pss": peak_pss,
            "checksum": res.get("checksum", "?")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=300_000)
    ap.add_argument("--quick", action="store_true", help="CI smoke run: small N, one short latency run")
    ap.add_argument("--peers", action="store_true", help="also run bytewax (2 processes) and the PySpark RDD peer")
    ap.add_argument("--streamlet", action="store_true", help="also run the Streamlet word count (--peers does)")
    ap.add_argument("--soak", type=float, default=120.0, help="seconds of the 50%%-of-peak run (RSS over time)")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--kafka", action="store_true",
                    help="also run the Kafka pipeline (bench/kafka_e2e.py; --quick runs its smoke form)")
    args = ap.parse_args()
    n = 20_000 if args.quick else args.sentences
    home = Path(tempfile.mkdtemp(prefix="heron-bench-"))
    expected = wc_common.checksum(wc_common.expected_counts(n))
    rows: list[tuple[str, dict[str, Any]]] = [("plain loop (baseline, this run)", plain(n))]
    base = rows[0][1]["words_per_s"]
    for acking in (False, True):
        rows.append((f"heron-py word count, acking {'on' if acking else 'off'}", ours(n, acking, home)))
    if args.peers or args.streamlet:
        # the Streamlet word count (issue 39): source -> flat_map(str.split) -> by word -> count,
        # its operators run per batch (bench/streamlet_wc.py)
        rows.append(("heron-py Streamlet word count, acking off",
                     ours(n, False, home, program="streamlet_wc.py")))
        # the program as heronpy's API has a user write it: ... → repartition(2, fn) →
        # consume(a counting function), the default config (issue 57's "obvious" program)
        rows.append(("heron-py Streamlet word count, written the obvious way (consume), defaults",
                     ours(n, False, home, program="streamlet_wc.py", program_args=("consume",))))
        # the same with the engine's keyed count: flat_map -> count_by_key -> a latest-count sink
        rows.append(("heron-py Streamlet word count, count_by_key, acking off",
                     ours(n, False, home, program="streamlet_wc.py", program_args=("keyed",))))
        # and with a repartition by word before the count_by_key, as the issue words the shape
        rows.append(("heron-py Streamlet word count, repartition + count_by_key, acking off",
                     ours(n, False, home, program="streamlet_wc.py", program_args=("keyed-repartition",))))
        # count_by_key in Heron's default "update" mode: a (word, count) pair per word to the sink
        rows.append(("heron-py Streamlet word count, count_by_key updates, acking off",
                     ours(n, False, home, program="streamlet_wc.py", program_args=("keyed-update",))))
    if args.peers:
        py = peers_python()
        rows.append(("bytewax 0.21.1, 2 processes (peer)", peer(py, "bench_bytewax.py", ["--procs", "2"], n)))
        rows.append(("PySpark RDD local[2] (peer)", peer(py, "bench_spark.py", ["--mode", "rdd"], n)))
    lat: list[tuple[str, dict[str, Any]]] = []
    if not args.no_latency:
        off_peak = rows[1][1]["words_per_s"] / 10
        on_peak = rows[2][1]["words_per_s"] / 10
        if args.quick:
            lat.append(("acking off, 2k sentences/s", latency(2000, False, home, 1, 3, 0)))
        else:
            lat.append(("acking off, 10k sentences/s", latency(10_000, False, home, 5, 20, 0)))
            lat.append((f"acking off, 50% of peak ({off_peak / 2:,.0f}/s)",
                        latency(off_peak / 2, False, home, 5, 20, 0)))
            # the latency pipeline does more per word than the word count (a timestamp per word,
            # a histogram per update), so 50% of the word count's peak can be most of its own.
            # Its own peak: what it sustains when asked for twice the word count's (overloaded),
            # as the shared peers' README takes bytewax's latency peak
            own = latency(off_peak * 2, False, home, 3, 8, 0)
            lat.append((f"acking off, overloaded (asked {off_peak * 2:,.0f}/s)", own))
            lat.append((f"acking off, 50% of the latency pipeline's peak ({own['achieved'] / 2:,.0f}/s)",
                        latency(own["achieved"] / 2, False, home, 5, 20, args.soak)))
            lat.append((f"acking on, 50% of peak ({on_peak / 2:,.0f}/s)",
                        latency(on_peak / 2, True, home, 5, 20, 0)))

    print(f"\nword count, {n:,} sentences ({10 * n:,} words); {platform.node()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.2f}; {hot_path()}\n")
    print("| system | words/s | x plain | t_run s | peak RSS / PSS MB | checksum |")
    print("|---|---|---|---|---|---|")
    bad = []
    for name, r in rows:
        mem = f"{r['rss']:.0f} / {r['pss']:.0f}" if "rss" in r else "-"
        ok = r["checksum"] == expected
        if not ok:
            bad.append(name)
        print(f"| {name} | {r['words_per_s']:,.0f} | {r['words_per_s'] / base:.3f} | {r['t_run']:.2f} | {mem} | "
              f"{r['checksum']}{'' if ok else ' WRONG'} |")
    print(f"\nexpected checksum {expected}")
    if lat:
        print("\n| latency run | achieved sentences/s | what | p50 ms | p90 ms | p99 ms | max ms |")
        print("|---|---|---|---|---|---|---|")
        for name, r in lat:
            parts = [("end to end", r["e2e"])] + ([("complete (acked)", r["complete"])] if "complete" in r else [])
            for what, h in parts:
                if not h.get("n"):
                    print(f"| {name} | {r['achieved']:,.0f} | {what} | no samples | | | |")
                    continue
                print(f"| {name} | {r['achieved']:,.0f} | {what} | {h['p50_ms']:.2f} | {h['p90_ms']:.2f} | "
                      f"{h['p99_ms']:.2f} | {h['max_ms']:.1f} |")
        for name, r in lat:
            if r["soak_s"] >= 60:
                print(f"\nRSS MB over the {r['soak_s']:.0f} s run '{name}' (first sample -> last):")
                for role in sorted(r["rss_last"]):
                    if role.startswith(("stmgr", "instance")):
                        print(f"  {role:<22} {r['rss_first'][role]:7.1f} -> {r['rss_last'][role]:7.1f}")
    if args.quick or args.kafka:
        kafka_pipeline(args.quick)
    if bad:
        print(f"\nbench: WRONG checksum for {', '.join(bad)}", file=sys.stderr)
        return 1
    return 0


def kafka_pipeline(quick: bool) -> None:
    """Kafka → word count → Kafka's peak and latency beside the broker's floor
    (bench/kafka_e2e.py; --quick: its smoke figures), so a regression of the real pipeline shows
    in CI's smoke run as a figure. Skipped, with the reason, where Tansu is not installed."""
    sys.path.insert(0, str(ROOT))
    from tests.kafka_broker import tansu_binary

    if tansu_binary() is None:
        print("\nKafka pipeline: skipped (no Tansu broker: bash scripts/tansu.sh installs it)")
        return
    print("\nKafka → word count → Kafka (bench/kafka_e2e.py" + (" --quick" if quick else "") + "):", flush=True)
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "kafka_e2e.py"), *(["--quick"] if quick else [])],
                         capture_output=True, text=True, timeout=900)
    # librdkafka's own log lines (a connection refused while a broker stops) are not the figures
    print("\n".join(line for line in out.stdout.splitlines() if not line.startswith("%")))
    if out.returncode != 0:
        print(f"bench/kafka_e2e.py failed ({out.returncode}): {out.stderr[-2000:]}", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
