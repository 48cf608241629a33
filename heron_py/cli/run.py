"""``heron-py run FILE``: a topology in this one process, for development (Storm's ``storm
local``, streamparse's ``sparse run``).

No daemons, no state manager, no package: every task's host runs here with the engine's own
routing and batching (the in-process runner, ``heron_py.testing.runner``, on the wall clock),
the spouts are called in turn and every batch is delivered, bolts get tick tuples at their
configured interval, and what the components print or log appears on this terminal. It runs for
``--duration`` seconds (or until every spout has gone quiet, or Ctrl-C), closes every component
(delivering what their cleanup emits), and prints what each bolt received.

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

if TYPE_CHECKING:  # the engine is imported by the run itself: the CLI's other verbs do not load it
    from heron_py.planner.model import TopologyDef
    from heron_py.runtime.host import Observer
    from heron_py.testing.runner import Runner

IDLE_SLEEP_S = 0.001  # a round in which no spout emitted and nothing moved: do not spin
LOG = logging.getLogger("heron-py run")


def _counting(counts: Counter[str]) -> Callable[[int, str], Observer]:
    """What each bolt receives, counted per component instead of kept (a run of minutes would
    otherwise hold every tuple)."""

    def observer(task: int, component: str) -> Observer:
        def seen(source: Any, src: Any, rows: Any) -> None:
            counts[component] += len(rows)
        return seen

    return observer


def spout_outcomes(run: Runner) -> tuple[int, int] | None:
    """(trees acked, trees failed or timed out) over every spout task; None at most once."""
    from heron_py.runtime.host import SpoutHost

    tracked = [sp.metrics for sp in run.hosts(SpoutHost) if sp.reliability is not None]
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
    from heron_py.testing.inprocess import in_process_plan
    from heron_py.testing.runner import Acking, Runner, RunOptions

    counts: Counter[str] = Counter()
    # the topology's own acking on the wall clock; shell components polled; no master waits on the routing
    options = RunOptions(clock=clock, acking=Acking.of(topo, clock), poll=True, route_at_once=True,
                         observer=_counting(counts))
    run = Runner(in_process_plan(topo, containers, "in-process"), options, random.Random(seed))
    run.start()
    start = clock()
    quiet = 0
    try:
        while clock() - start < duration_s and not stop():
            emitted = any(run.call_spouts(1).values())
            moved = run.drain()
            moved = run.timers.fire_due() or moved  # ticks at their interval, message timeouts
            if emitted or moved:
                quiet = 0
                continue
            quiet += 1
            if idle_rounds is not None and quiet >= idle_rounds and not run.pollable:
                break
            time.sleep(IDLE_SLEEP_S)
        run.drain()
    finally:
        run.close(on_error=_warn)
    return counts, clock() - start, spout_outcomes(run)


def _warn(what: str, e: Exception) -> None:
    LOG.warning("%s: %s", what, e)


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
