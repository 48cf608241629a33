"""Helpers for users' own tests.

- ``Harness(topology, ...)``: runs a topology in this process with fault and time control:
  ``TestSource`` (items with ``EOF`` and ``ABORT`` markers), ``kill_at``, ``fail_at``, a clock
  the test advances (ticks, windows, message timeouts, checkpoints), and the spouts' acks and
  fails per message id in its result.
- ``run_in_process(topology, ...)``: runs a topology in this process with the real plans,
  groupings and batching, and returns what chosen bolts received. For unit tests of
  components: fast, deterministic for a given seed, no sockets.
- ``run_local(file, ...)``: submits a topology file to the local scheduler (real processes),
  waits until the captured tuples satisfy a condition, kills it, and returns them.
"""

from heron_py.testing.harness import Harness, HarnessResult, ManualClock, MemoryStorage, Outcome
from heron_py.testing.inprocess import InProcessResult, run_in_process
from heron_py.testing.local import LocalRun, run_local
from heron_py.testing.source import ABORT, EOF, PAUSE, TaskKilled, TestSource

__all__ = ["ABORT", "EOF", "PAUSE", "Harness", "HarnessResult", "InProcessResult", "LocalRun", "ManualClock",
           "MemoryStorage", "Outcome", "TaskKilled", "TestSource", "run_in_process", "run_local"]
