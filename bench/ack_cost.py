"""What acking costs each task of the word count, in CPU per item, with no threads, sockets or
stream manager: the three tasks of bench/wc_topology.py run one after another in this process
through the engine's own hosts (the code an instance runs), acking off and on.

    python bench/ack_cost.py [--sentences 200000] [--reps 3]
    python bench/ack_cost.py --rev REV [--reps 5]    # A = the engine at REV, B = this tree

The spout host emits every sentence; the split host processes the spout's batches; the count
host processes the split's. Each host flushes after every batch it is given, as an instance
does when its input queue runs dry, so acks are merged per batch as they are when running; the
process runs with the instance's gc threshold (heron_py.instance.gc.threshold). CPU
is process time per stage: the spout per sentence, the split and the count per word. The
stream manager's work with acking on is a row of its own: the ACK_BATCH frames the three tasks
sent (the spout's inits, then the split's and the count's acks), applied to a fresh XorTracker
as the spout's stream manager does, in ns per record; and the spout's share of the results
another: the ACK_RESULT frames the tracker wrote, handed to the spout host as its task gets them
(in "all three" with acking on).
Prints the median of --reps runs of each mode and the difference, on minus off. With --rev, each
rep runs this script once under an interpreter that imports the engine at REV (bench/ab.py's
worktree, compiled as installed) and once under this tree's, alternating, and prints the two
sides' minimum and median per stage: one process and no scheduling, so a change of a few per
cent in one stage shows, where the whole topology's run-to-run spread hides it.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "bench"))

import wc_topology as wc  # noqa: E402

from heron_py.acking.tracker import XorTracker  # noqa: E402
from heron_py.common.config import InstanceConfig, Mode, ReliabilityConfig  # noqa: E402
from heron_py.common.framing import (  # noqa: E402
    BATCH_HEADER,
    BODY_OFFSET,
    HEADER_SIZE,
    RESULT_RECORD,
    MsgType,
    batch_count,
    batch_dest,
    encode_batch_frame,
    frame_type,
)
from heron_py.runtime.host import BoltHost, HostOptions, SpoutHost, make_host  # noqa: E402
from heron_py.spark.plan import plan_batch  # noqa: E402
from heronpy.api.stream import Grouping  # noqa: E402
from heronpy.api.topology import TopologyBuilder  # noqa: E402


def stream_manager_tracker() -> XorTracker:
    """The tracker as the stream manager's ack service builds it (every revision with
    heron_py.acking.tracker, which this script imports, has that service)."""
    from stream_manager.acking import AckService

    return AckService(lambda _task, _frame: None, logging.getLogger("ack_cost")).tracker


def _bodies(frames: list[bytes], dests: set[int]) -> list[tuple[int, bytes]]:
    out = []
    for f in frames:
        if frame_type(f) == MsgType.TUPLE_BATCH:
            dest, src, _ = BATCH_HEADER.unpack_from(f, HEADER_SIZE)
            if dest in dests:
                out.append((src, f[BODY_OFFSET:]))
    return out


def run(n: int, acking: bool) -> dict[str, float]:
    """One pass of n sentences: CPU per sentence (spout) and per word (split, count), in us."""
    b = TopologyBuilder("ack_cost")
    s = b.add_spout("sentence", wc.BenchSpout, par=1)
    sp = b.add_bolt("split", wc.BenchSplit, par=1, inputs={s: Grouping.SHUFFLE})
    b.add_bolt("count", wc.BenchCount, par=1, inputs={sp: Grouping.fields("word")})
    cfg: dict[str, Any] = {"bench.sentences": n, "bench.dir": tempfile.mkdtemp(prefix="heron-ack-cost-")}
    if acking:
        cfg.update({"topology.reliability.mode": "ATLEAST_ONCE", "topology.max.spout.pending": 1 << 40})
    b.set_config(cfg)
    topo = b.build()
    plan = plan_batch(topo)
    pplan = plan.physical()
    rel = ReliabilityConfig(Mode.ATLEAST_ONCE if acking else Mode.ATMOST_ONCE, 30.0, None)

    def host(component: str) -> tuple[Any, list[bytes]]:
        frames: list[bytes] = []
        h = make_host(pplan, plan.tasks_of(component)[0], frames.extend,
                      HostOptions(reliability=rel, rng=random.Random(1)))
        h.initialize()
        h.start()
        return h, frames

    # the instance's gc setting, as TaskRunner sets it (an engine from before it had none: CPython's)
    try:
        from instance.execution import set_gc_threshold
    except ImportError:
        pass
    else:
        set_gc_threshold(InstanceConfig.from_config(topo.config))

    spout, spout_out = host("sentence")
    assert isinstance(spout, SpoutHost)
    t = time.process_time()
    while spout.next_tuples(1000):
        pass
    spout.flush()
    t_spout = time.process_time() - t
    times = {"spout us/sentence": t_spout / n * 1e6}
    upstream = spout_out
    ack_frames = [f for f in spout_out if frame_type(f) == MsgType.ACK_BATCH]
    for name in ("split", "count"):
        bolt, out = host(name)
        assert isinstance(bolt, BoltHost)
        bodies = _bodies(upstream, set(plan.tasks_of(name)))
        t = time.process_time()
        for src, body in bodies:
            bolt.process_body(src, body)
            bolt.flush()
        times[f"{name} us/word"] = (time.process_time() - t) / (10 * n) * 1e6
        ack_frames += [f for f in out if frame_type(f) == MsgType.ACK_BATCH]
        upstream = out
    if acking:
        ns, results = _tracker_ns(ack_frames, n)
        times["tracker ns/record"] = ns
        # and the spout's side of it: the ACK_RESULT frames the tracker wrote, as the spout
        # task gets them (message ids resolved, its ack() called, its metrics counted)
        t = time.process_time()
        for f in results:
            spout.on_results(f)
        times["spout results us/sentence"] = (time.process_time() - t) / n * 1e6
        if spout.reliability is not None and spout.reliability.pending:
            raise SystemExit(f"ack_cost: {len(spout.reliability.pending)} roots still pending at the spout")
    return times


def _tracker_ns(frames: list[bytes], roots: int) -> tuple[float, list[bytes]]:
    """The ACK_BATCH frames applied to one tracker in the order sent; every root must resolve.
    Returns ns per record and the ACK_RESULT frames for the spout task."""
    tracker = stream_manager_tracker()
    records = resolved = 0
    out: list[bytes] = []
    t = time.process_time()
    apply = getattr(tracker, "apply_body", None)  # an engine from before it: the list form
    for f in frames:
        if apply is not None:  # as AckService.on_ack_batch
            results = bytearray()
            apply(batch_dest(f), memoryview(f)[BODY_OFFSET:], results)
            resolved += len(results) // RESULT_RECORD.size
        else:
            done, _ = tracker.apply(batch_dest(f), memoryview(f)[BODY_OFFSET:])
            resolved += len(done)
            results = bytearray(b"".join(RESULT_RECORD.pack(*r) for r in done))
        if results:
            out.append(encode_batch_frame(batch_dest(f), 0, bytes(results), MsgType.ACK_RESULT,
                                          len(results) // RESULT_RECORD.size))
        records += batch_count(f)
    dt = time.process_time() - t
    if resolved != roots:
        raise SystemExit(f"ack_cost: {resolved} of {roots} roots resolved")
    return dt / records * 1e9, out


def rev_ab(rev: str, reps: int, sentences: int) -> None:
    from ab import checkout_python  # type: ignore[import-not-found]

    sides = {f"A {rev}": checkout_python(rev), "B this tree": sys.executable}
    got: dict[str, list[dict[str, dict[str, float]]]] = {k: [] for k in sides}
    for _ in range(reps):
        for name, py in sides.items():
            p = subprocess.run([py, __file__, "--json", "--reps", "1", "--sentences", str(sentences)],
                               check=True, capture_output=True, text=True, cwd=Path(py).parent)
            got[name].append(json.loads(p.stdout))
    print(f"{sentences:,} sentences, {reps} runs per side, alternating; min / median")
    names = list(sides)
    print(f"| stage | {names[0]} | {names[1]} | B/A of the minima |")
    print("|---|---|---|---|")
    for mode in ("off", "on"):
        for m in got[names[0]][0][mode]:
            cols = []
            for name in names:
                xs = [r[mode][m] for r in got[name]]
                cols.append((min(xs), statistics.median(xs)))
            print(f"| acking {mode}: {m} | {cols[0][0]:.3f} / {cols[0][1]:.3f} | {cols[1][0]:.3f} / {cols[1][1]:.3f} "
                  f"| {cols[1][0] / cols[0][0]:.3f} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rev", help="A: the engine at this git revision; B: the working tree")
    ap.add_argument("--json", action="store_true", help="print the medians as JSON (what --rev reads)")
    a = ap.parse_args()
    if a.rev:
        rev_ab(a.rev, a.reps, a.sentences)
        return
    res: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    for _ in range(a.reps):
        for acking in (False, True):
            res[acking].append(run(a.sentences, acking))
    med = {k: {m: statistics.median(r[m] for r in runs) for m in runs[0]} for k, runs in res.items()}
    if a.json:
        print(json.dumps({"off": med[False], "on": med[True]}))
        return
    print(f"{a.sentences:,} sentences, median of {a.reps}, CPU per item in this process")
    print("| stage | acking off | acking on | on - off |")
    print("|---|---|---|---|")
    for m in med[False]:
        off, on = med[False][m], med[True][m]
        print(f"| {m} | {off:.3f} | {on:.3f} | {on - off:+.3f} |")
    print(f"| stream manager: tracker ns/record | - | {med[True]['tracker ns/record']:.1f} | - |")
    results = med[True]["spout results us/sentence"]
    print(f"| spout: its ACK_RESULT frames, us/sentence | - | {results:.3f} | - |")
    words = {k: v["spout us/sentence"] / 10 + v["split us/word"] + v["count us/word"] for k, v in med.items()}
    words[True] += results / 10
    print(f"| all three, us/word | {words[False]:.3f} | {words[True]:.3f} | {words[True] - words[False]:+.3f} |")


if __name__ == "__main__":
    main()
