"""The health manager at work, traced: the scenario of tests/integration/test_autoscale.py (a word
count at least once whose input steps 1x -> 4x -> 1x, tests/integration/topologies/
stepped_word_count.py) on the local scheduler, with ``heron-py autoscale`` running beside it.

    python bench/autoscale_trace.py [--schedule 0:15,25:60,70:15] [--duration 110] [--out autoscale_trace]

Every ``--every`` seconds it samples, from the topology master's HTTP API: the parallelism per
component (the running plan), the sentences/s the spout emitted (over the health manager's
window) and the spout's p99 complete latency; the input rate is the schedule's. It writes
OUT.csv (one row per sample, with the health manager's actions of that moment), OUT.jsonl (the
health manager's own record, logs/autoscale.jsonl) and OUT.png (matplotlib, when installed).
The topology is killed at the end. A run takes ``--duration`` seconds plus about 10.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from heron_py.cli.admin import tm_get  # noqa: E402
from heron_py.cli.autoscale_log import last_entries, log_path  # noqa: E402
from heron_py.cli.errors import AdminError  # noqa: E402
from heron_py.state import LocalFsStateManager  # noqa: E402
from heron_py.testing import run_local  # noqa: E402
from heron_py.testing.local import kill_local  # noqa: E402

TOPOLOGY = ROOT / "tests" / "integration" / "topologies" / "stepped_word_count.py"
NAME = "autoscale_trace"
COMPONENTS = ("sentence", "split", "count")


def topology_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("stepped_word_count", TOPOLOGY)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sample(state: LocalFsStateManager, window: float) -> dict[str, Any]:
    """The running plan's parallelism, the spout's emit rate over ``window`` and its p99 complete
    latency; empty values while the master does not answer (an update restarts it)."""
    row: dict[str, Any] = {}
    try:
        plan = tm_get(state, NAME, "/topologies/physicalplan", timeout=2.0)
        running = {**plan.get("spouts", {}), **plan.get("bolts", {})}
        row.update({f"parallelism_{c}": len(running.get(c, ())) for c in COMPONENTS})
        got = tm_get(state, NAME, "/topologies/metrics",
                     {"component": "sentence", "interval": window,
                      "metricname": ["__emit-count/default", "__complete-latency-ms/p99"]}, timeout=2.0)["metrics"]
        emitted = got.get("__emit-count/default", {})
        row["emitted_per_s"] = round(sum(emitted.values()) / window, 2) if emitted else ""
        p99 = got.get("__complete-latency-ms/p99", {})
        row["p99_ms"] = round(max(p99.values()), 2) if p99 else ""
    except AdminError:
        pass
    return row


def trace(args: argparse.Namespace, home: Path, wc: ModuleType) -> list[dict[str, Any]]:
    schedule = wc.parse_schedule(args.schedule)
    window = float(wc.AUTOSCALE["heron_py.autoscale.window.secs"])
    epoch = time.time()
    run_local(TOPOLOGY, ["--schedule", args.schedule, "--epoch", repr(epoch), "--offsets", str(home / "offsets"),
                         "--name", NAME], home=home, name=NAME, keep_running=True)
    env = {**os.environ, "HERON_PY_HOME": str(home)}
    with (home / "autoscale.out").open("w") as out:
        hm = subprocess.Popen([sys.executable, "-m", "heron_py.cli.main", "autoscale", "local", NAME], stdout=out,
                              stderr=subprocess.STDOUT, env=env)
    state = LocalFsStateManager(home)
    rows: list[dict[str, Any]] = []
    marked: set[float] = set()
    try:
        while time.time() < epoch + args.duration:
            t = time.time() - epoch
            row = {"time_s": round(t, 2), "input_per_s": wc.rate_at(schedule, t), **sample(state, window)}
            # an action is recorded once carried out (an update takes seconds): on the first
            # sample that sees it, with the time it was decided at
            acted = [e for e in last_entries(NAME, 50, home=home)
                     if e.get("decision") in ("scale", "restart") and e["time"] not in marked]
            marked.update(e["time"] for e in acted)
            row["action"] = "; ".join(
                f"{e['decision']} {e['action'].get('parallelism', e['action'].get('container'))} decided at "
                f"{e['time'] - epoch:.1f} s" + ("" if (e.get("outcome") or {}).get("ok") else " (FAILED)")
                for e in acted)
            rows.append(row)
            time.sleep(max(0.0, epoch + t + args.every - time.time()))
    finally:
        hm.terminate()
        hm.wait(timeout=90)
        state.close()
        if log_path(NAME, home).exists():
            shutil.copy(log_path(NAME, home), f"{args.out}.jsonl")
        kill_local(home, NAME)
    return rows


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    fields = ["time_s", "input_per_s", "emitted_per_s", *(f"parallelism_{c}" for c in COMPONENTS), "p99_ms",
              "action"]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(rows)


def write_png(rows: list[dict[str, Any]], path: Path) -> bool:
    """The trace as two panels: rates and parallelism, then p99 latency; False without matplotlib."""
    try:
        import matplotlib  # type: ignore[import-not-found,unused-ignore]

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return False

    def series(key: str) -> tuple[list[float], list[float]]:
        pts = [(r["time_s"], float(r[key])) for r in rows if r.get(key) not in (None, "")]
        return [p[0] for p in pts], [p[1] for p in pts]

    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 7))
    top.step(*series("input_per_s"), where="post", label="input (sentences/s)")
    top.plot(*series("emitted_per_s"), label="emitted (sentences/s)")
    top.set_ylabel("sentences/s")
    par = top.twinx()
    for c in COMPONENTS[1:]:
        par.step(*series(f"parallelism_{c}"), where="post", linestyle="--", label=f"{c} tasks")
    par.set_ylabel("tasks")
    lines = top.get_legend_handles_labels()[0] + par.get_legend_handles_labels()[0]
    top.legend(lines, top.get_legend_handles_labels()[1] + par.get_legend_handles_labels()[1], loc="upper left")
    bottom.plot(*series("p99_ms"), label="p99 complete latency (ms)")
    bottom.set_ylabel("ms")
    bottom.set_xlabel("seconds from the schedule's start")
    for r in rows:
        if r.get("action"):
            for ax in (top, bottom):
                ax.axvline(r["time_s"], color="grey", alpha=0.4)
    fig.tight_layout()
    fig.savefig(path)
    return True


def main(argv: list[str] | None = None) -> int:
    wc = topology_module()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--schedule", default=wc.SCHEDULE, help="OFFSET:RATE,... sentences/s (default: the test's)")
    ap.add_argument("--duration", type=float, default=110.0, help="seconds from the schedule's start to the end")
    ap.add_argument("--every", type=float, default=1.0, help="seconds between samples")
    ap.add_argument("--out", default="autoscale_trace", help="OUT.csv, OUT.jsonl and OUT.png are written")
    args = ap.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="autoscale-trace-"))
    try:
        rows = trace(args, home, wc)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    write_csv(rows, Path(f"{args.out}.csv"))
    print(f"wrote {args.out}.csv ({len(rows)} samples) and {args.out}.jsonl (the health manager's record)")
    if write_png(rows, Path(f"{args.out}.png")):
        print(f"wrote {args.out}.png")
    else:
        print(f"no {args.out}.png: matplotlib is not installed in this Python ({sys.executable})")
    for r in rows:
        if r.get("action"):
            print(f"{r['time_s']:7.1f} s  input {r['input_per_s']:g}/s  {r['action']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
