"""Effectively-once checkpoints: the pure logic of Chandy-Lamport style snapshots.

- :mod:`heron_py.checkpoint.alignment`: a task's side: a bolt aligns checkpoint markers over its
  input channels; a spout saves on the master's request and emits markers.
- :mod:`heron_py.checkpoint.coordinator`: the topology master's side: starts checkpoints on an
  interval, declares them complete, aborts the late ones, drives restore after a failure.
- :mod:`heron_py.checkpoint.storage`: where the saved state lives (atomic, checksummed files).
- :mod:`heron_py.checkpoint.failures`: which restore errors are transient, the backoff, and the
  failure manager (checkpoints failed in a row).
- :mod:`heron_py.checkpoint.operator`: the ``heron-py restore`` command on the admin wire.

The first two do no I/O and read no clock: they take events (with the time where it matters) and
return actions, so the daemons can wire them to sockets and the tests can drive every order.
"""

from __future__ import annotations
