"""How long an effectively-once restore takes behind a slow task's backlog, with the engine's
default buffers (a 16 MB high watermark, 64-batch input queues).

    python bench/restore_backlog.py [--overload 20] [--rate 60] [--cost-ms 4] [--runs 2]

The topology is tests/integration/topologies/stepped_word_count.py under effectively once (a
checkpoint a second) with ``--engine-buffers``: one count task that takes ``--cost-ms`` per
word (a sleep) gets ``--rate`` sentences of 10 words a second, more than it can count, so its
input piles up in its stream manager for ``--overload`` seconds. Then ``heron-py update`` adds
a count task, which is a live rescale with a restore of every task. The restore's time is from
the master's "restore N to checkpoint" to the first "every task restored" after it (a restore
that times out is ordered again, and counted); with it, what the stream manager and the old
count task dropped of the old run. Prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from heron_py.testing import run_local  # noqa: E402
from heron_py.testing.local import kill_local  # noqa: E402

TOPOLOGY = ROOT / "tests" / "integration" / "topologies" / "stepped_word_count.py"
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _at(line: str) -> float:
    m = STAMP.match(line)
    assert m is not None, line
    return datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def restore_timing(logs: Path) -> dict[str, object]:
    """The rescale's restore in the master's log (its time), and what was dropped at it: by the
    stream manager (held frames) and by each kept task (queued batches), from their logs (pure
    but for reading them)."""
    master = (logs / "container-0" / "tmanager.log").read_text().splitlines()
    begin = next(ln for ln in master if re.search(r"restore \d+ to checkpoint \d+ \(rescale", ln))
    n = re.search(r"restore (\d+) to", begin)
    assert n is not None
    # the first restore done after it: its own, or a later one that replaced it (a restore that
    # times out waiting for a task is ordered again)
    after = master[master.index(begin):]
    done = next(ln for ln in after if (m := re.search(r"every task restored \(restore (\d+)\)", ln))
                and int(m[1]) >= int(n[1]))
    retries = sum(1 for ln in after[:after.index(done)] if re.search(r"restore \d+ to checkpoint", ln)) - 1
    stmgr = (logs / "container-0" / "stmgr.log").read_text()
    held = re.search(r"restore \d+ to checkpoint \d+ \(rescale[^)]*\): (\d+) held frames", stmgr)
    queued = [int(m[1]) for f in sorted((logs / "container-0").glob("count-*.log"))
              if (m := re.search(r"restore \d+: (\d+) queued batches", f.read_text()))]
    return {"restore_s": round(_at(done) - _at(begin), 3), "restores_ordered_again": retries,
            "stmgr_dropped_frames": int(held[1]) if held else 0,
            "task_dropped_batches": queued}


def one_run(args: argparse.Namespace, run: int) -> dict[str, object]:
    home = Path(tempfile.mkdtemp(prefix="heron-restore-"))
    os.environ["HERON_PY_HOME"] = str(home)
    name = "restore_backlog"
    topo_args = ["--effectively-once", "--engine-buffers", "--schedule", f"0:{args.rate:g}", "--cost-ms",
                 str(args.cost_ms), "--name", name]
    run_local(TOPOLOGY, topo_args, home=home, name=name, keep_running=True)
    try:
        time.sleep(args.overload)
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "heron_py.cli.main", "update", "local", name,
                            "--component-parallelism", "count:2"], capture_output=True, text=True, timeout=600)
        update_s = time.monotonic() - t0
        if p.returncode != 0:
            raise SystemExit(f"update failed: {p.stderr}")
        logs = home / "topologies" / name / "logs"
        deadline = time.monotonic() + 600
        while True:
            try:
                row = restore_timing(logs)
                break
            except StopIteration:
                if time.monotonic() > deadline:
                    raise SystemExit("the rescale's restore did not finish in 600 s") from None
                time.sleep(0.5)
    finally:
        kill_local(home, name)
    return {"run": run, "overload_s": args.overload, "rate": args.rate, "cost_ms": args.cost_ms,
            "update_s": round(update_s, 3), **row}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--overload", type=float, default=20.0, help="seconds of overload before the rescale")
    ap.add_argument("--rate", type=float, default=60.0, help="sentences per second (10 words each)")
    ap.add_argument("--cost-ms", type=float, default=4.0, help="the count bolt's time per word")
    ap.add_argument("--runs", type=int, default=2)
    args = ap.parse_args()
    for run in range(args.runs):
        print(json.dumps(one_run(args, run)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
