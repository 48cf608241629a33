"""Helpers for users' own tests.

- ``run_in_process(topology, ...)``: runs a topology in this process with the real plans,
  groupings and batching, and returns what chosen bolts received. For unit tests of
  components: fast, deterministic for a given seed, no sockets.
- ``run_local(file, ...)``: submits a topology file to the local scheduler (real processes),
  waits until the captured tuples satisfy a condition, kills it, and returns them.
"""

from heron_py.testing.inprocess import InProcessResult, run_in_process
from heron_py.testing.local import LocalRun, run_local

__all__ = ["InProcessResult", "LocalRun", "run_in_process", "run_local"]
