"""``heron-py run FILE``: a topology in this one process, for development (Storm's ``storm
local``, streamparse's ``sparse run``).

No daemons, no state manager, no package: every task's host runs here with the engine's own
routing and batching (``heron_py.testing.inprocess``), the spouts are called in turn and every
batch is delivered, bolts get tick tuples at their configured interval, and what the
components print or log appears on this terminal. It runs for ``--duration`` seconds (or until
every spout has gone quiet, or Ctrl-C), closes every component, and prints what each bolt
received.

At least once (``topology.reliability.mode`` ATLEAST_ONCE, or Storm's ``topology.acking``), the
stream managers' XOR tracker (``heron_py.acking.tracker``, as the test harness runs it) tracks
every tuple tree here on the wall clock: spouts get ``ack``/``fail`` (a timeout after
``topology.message.timeout.secs`` too) and ``topology.max.spout.pending`` holds them back, as
in a submitted topology; the last line adds what the spouts' trees came to.
"""

from __future__ import annotations

import argparse
import logging
import random
import signal
import sys
import time
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from heron_py.common.config import TICK
from heron_py.common.config_codec import restore_config

if TYPE_CHECKING:  # the engine is imported by the run itself: the CLI's other verbs do not load it
    from heron_py.acking.tracker import ClockedTracker
    from heron_py.planner.model import TopologyDef
    from heron_py.testing.inprocess import _InProcess

IDLE_SLEEP_S = 0.001  # a round in which no spout emitted and nothing moved: do not spin
EXPIRE_EVERY_S = 1.0  # how often trees past the message timeout are failed (the instance's own period)


def _counting(topo: TopologyDef, containers: int, seed: int,
              clock: Callable[[], float]) -> tuple[_InProcess, Counter[str], ClockedTracker | None]:
    """The in-process run, counting what each bolt receives instead of keeping it (a run of
    minutes would otherwise hold every tuple), with the topology's acking; its counts; and its
    ack tracker (None at most once)."""
    from heron_py.acking.tracker import ClockedTracker
    from heron_py.common.config import ReliabilityConfig
    from heron_py.runtime.host import Observer, SpoutHost
    from heron_py.testing.inprocess import InProcessResult, _InProcess

    counts: Counter[str] = Counter()
    reliability = ReliabilityConfig.from_config(topo.config)
    tracker = ClockedTracker(reliability.timeout_s, clock) if reliability.acking else None

    class Counting(_InProcess):
        def _reliability(self) -> ReliabilityConfig:
            return reliability

        def _observer(self, task: int, component: str) -> Observer | None:
            def seen(source: Any, src: Any, rows: Any) -> None:
                counts[component] += len(rows)
            return seen

        def _on_acks(self) -> Callable[[bytes], None] | None:
            return tracker.on_ack_batch if tracker is not None else None

        def drain(self) -> bool:
            """Delivers every batch, and every tree's outcome to its spout, until neither moves."""
            worked = False
            while True:
                moved = super().drain()
                results = tracker.take_results() if tracker is not None else {}
                for task, frame in results.items():
                    host = self.hosts[task]
                    assert isinstance(host, SpoutHost)
                    host.on_results(frame)
                for sp in self.spouts:
                    sp.acks_due()  # trees that completed at emit (no consumer took a copy)
                if not (moved or results):
                    return worked
                worked = True

    return Counting(topo, containers, InProcessResult(), random.Random(seed)), counts, tracker


def spout_outcomes(run: _InProcess) -> tuple[int, int] | None:
    """(trees acked, trees failed or timed out) over every spout task; None at most once."""
    tracked = [sp.metrics for sp in run.spouts if sp.reliability is not None]
    if not tracked:
        return None
    return sum(m.acked for m in tracked), sum(m.failed + m.timed_out for m in tracked)


def run_topology(topo: TopologyDef, *, duration_s: float, containers: int = 1, seed: int = 0,
                 clock: Callable[[], float] = time.monotonic, stop: Callable[[], bool] = lambda: False,
                 idle_rounds: int | None = None) -> tuple[Counter[str], float, tuple[int, int] | None]:
    """Runs ``topo`` until ``duration_s`` passed, ``stop()`` is true, or (with ``idle_rounds``)
    every spout emitted nothing that many rounds in a row; returns (tuples received per bolt,
    seconds run, the spouts' (acked, failed) trees at least once, else None). Every component
    is closed at the end, also on an exception."""
    run, counts, tracker = _counting(topo, containers, seed, clock)
    intervals = {b.task_id: s for b in run.bolts if (s := _tick_interval(topo, b.component))}
    start = clock()
    next_tick = {t: start + s for t, s in intervals.items()}
    next_expire = start + EXPIRE_EVERY_S
    quiet = 0
    try:
        while clock() - start < duration_s and not stop():
            emitted = sum(1 for sp in run.spouts if sp.next_tuples(1))
            moved = run.drain()
            now = clock()
            if tracker is not None and now >= next_expire:
                # the trees past the message timeout fail, as the stream manager and the spout's
                # own task fail them
                next_expire = now + EXPIRE_EVERY_S
                tracker.expire()
                for sp in run.spouts:
                    sp.expire()
            for b in run.bolts:
                due = next_tick.get(b.task_id)
                if due is not None and now >= due:
                    b.tick()
                    next_tick[b.task_id] = now + intervals[b.task_id]
                    moved = True
            if emitted or moved:
                quiet = 0
                continue
            quiet += 1
            if idle_rounds is not None and quiet >= idle_rounds and not run.pollable:
                break
            time.sleep(IDLE_SLEEP_S)
        run.drain()
    finally:
        for h in run.hosts.values():
            try:
                h.close()
            except Exception as e:  # one component's close must not hide the others' or the run's end
                logging.getLogger("heron-py run").warning("closing %s-%d: %s", h.component, h.task_id, e)
    return counts, clock() - start, spout_outcomes(run)


def _tick_interval(topo: TopologyDef, component: str) -> float | None:
    comp = next(c for c in topo.components if c.name == component)
    value = TICK.parse({**restore_config(topo.config), **restore_config(comp.config)})
    return float(value) if value else None


def cmd_run(args: argparse.Namespace) -> int:
    from heron_py.cli.submit import SubmitError, load_topology_file, parse_properties, prepare
    from heron_py.common.config import effectively_once
    from heron_py.common.serialization import MAIN_ALIAS

    # what the components log (self.log, logging) shows on this terminal, as in storm local
    logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s", stream=sys.stdout, force=True)
    path = Path(args.file)
    properties = parse_properties(args.config_property)
    topo = load_topology_file(path, args.args, properties=properties)
    # classes pickled from the file as __main__ resolve to the module it ran as (a container's
    # __heron_main__); load_topology_file keeps it as __heron_submitted_main__
    # (a Flux file: a stand-in named after it); its folder is where shell components run, as
    # in a container (resources/ if it has one)
    main = sys.modules.get("__heron_submitted_main__") if path.suffix not in (".yaml", ".yml") else None
    if main is None:
        main = types.ModuleType(MAIN_ALIAS)
        main.__file__ = str(path.resolve())
    sys.modules.setdefault(MAIN_ALIAS, main)
    topo, _ = prepare(topo, name=None, containers=1, properties=properties)
    if effectively_once(topo.config):
        # no checkpoints here: a stateful component's init_state would never be called
        raise SubmitError(f"run: topology '{topo.name}' asks for EFFECTIVELY_ONCE (topology.reliability.mode), "
                          f"whose checkpoints run does not take; expected ATMOST_ONCE or ATLEAST_ONCE, or submit "
                          f"it to the local cluster: heron-py submit local {args.file}")
    stopping: list[bool] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(True)  # the loop ends at its next round and closes every component

    previous = signal.signal(signal.SIGINT, on_signal), signal.signal(signal.SIGTERM, on_signal)
    print(f"running '{topo.name}' in this process for {args.duration:g} s (Ctrl-C stops it)", flush=True)
    try:
        counts, took, outcomes = run_topology(topo, duration_s=args.duration, containers=args.containers,
                                              stop=lambda: bool(stopping), idle_rounds=args.idle_rounds)
    finally:
        signal.signal(signal.SIGINT, previous[0])
        signal.signal(signal.SIGTERM, previous[1])
    why = "stopped" if stopping else "ran"
    bolts = ", ".join(f"{c} {n}" for c, n in sorted(counts.items())) or "none"
    trees = f"; spout tuples acked {outcomes[0]}, failed {outcomes[1]}" if outcomes is not None else ""
    print(f"{why} '{topo.name}' for {took:.1f} s; tuples received per bolt: {bolts}{trees}", flush=True)
    return 0


def add_parser(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    p = add_parser("run", state=False, help="run a topology in this process, without daemons, for development")
    p.usage = "heron-py run [options] FILE [TOPOLOGY ARG ...] [-- TOPOLOGY ARG ...]"
    p.add_argument("file", metavar="FILE", help="the topology: a Python file, a Python package folder (run as python "
                                                "-m PACKAGE runs it), or a Flux .yaml/.yml file")
    p.add_argument("--duration", type=float, default=10.0, metavar="SECONDS",
                   help="how long to run (default 10); Ctrl-C stops it sooner")
    p.add_argument("--containers", type=int, default=1,
                   help="containers to pack the tasks into, as a submit would (routing only; default 1)")
    p.add_argument("--idle-rounds", type=int, default=None, metavar="N",
                   help="stop early once no spout has emitted for N rounds in a row (finite spouts)")
    p.add_argument("--config-property", action="append", default=[], metavar="KEY=VALUE",
                   help="set a topology config key (repeatable); overrides the file's config")
    p.set_defaults(fn=cmd_run)
