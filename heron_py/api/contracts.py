"""The contracts between the engine and a source (a spout) or a sink (a bolt), connectors first:
what the engine calls, when, on which thread, and what it expects back.

A component is a heronpy ``Spout`` or ``Bolt`` (``SourceProtocol``, ``SinkProtocol``) and may
declare any of the optional hooks below, each its own Protocol. The engine finds a hook by name
once per task, at ``initialize`` (``getattr`` in heron_py/runtime/host.py and
heron_py/runtime/stateful.py), never per tuple; a component without it gets the plain per-tuple
path. Every call comes on the task's one execution thread (the instance's, or the in-process
runner's), never concurrently with another call of the same component, unless a hook says
otherwise. These are checked statically, not at run time: heron_py/connectors/conformance.py
assigns each connector class to ``type[...]`` of every contract it claims, so ``mypy --strict``
fails when a class stops satisfying one, and nothing is added to any call.

Sources (spouts), besides heronpy's Spout interface:

- ``BatchEmitSource``: a poll's records in one untracked emit call (``heron_emit_many``).
- ``BareBatchEmitSource``: a one-field stream's values, bare, in one call (``heron_emit_one_many``).
- ``TrackedBatchEmitSource``: a poll's records in one emit call with their message ids.
- ``TrackedRunEmitSource``: a poll's records in one emit call under one message id (one tuple
  tree: one ack or one fail for them all).
- ``BatchAckSource``: a result frame's acked ids in one call (``heron_ack_many``).
- ``WaitingSource``: next_tuple blocked on the source's own input (``heron_waited``).

Either side:

- ``PolledComponent``: input of its own the engine polls between tuples (``heron_poll``).
- ``BusyComponent``: work buffered that is not done yet (``heron_busy``).
- ``WakeableComponent``: a callable that wakes the task's loop from another thread.
- ``CheckpointedComponent`` and ``CheckpointCommitter``: effectively once's state and the
  master's word that a checkpoint is complete.

Sinks (bolts): ``BatchSink``, a batch of untracked inputs in one call.

Modelled on Bytewax's partitioned sources and Quix Streams' Source and Sink, in heron-py's own
terms: a partitioned source's positions travel in checkpoints (``CheckpointedComponent``), and a
sink commits what a checkpoint staged once the master says it is complete
(``CheckpointCommitter``; heron_py/connectors/committing.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

from heron_py.api.state.state import State


class SourceProtocol(Protocol):
    """A spout as the engine drives it (heronpy's ``Spout``; heron_py/runtime/host.py SpoutHost).

    - ``initialize(config, context)``: once, before anything else but ``init_state``.
    - ``next_tuple()``: in the spout loop while the topology is active and below
      ``topology.max.spout.pending``; emits zero or more tuples and returns (it may block
      briefly on its own input: see ``WaitingSource``).
    - ``ack(tup_id)`` / ``fail(tup_id)``: at least once, per message id whose tree completed,
      failed or timed out, in the order the stream manager reported them.
    - ``activate()`` / ``deactivate()``: when the topology's state changes.
    - ``close()``: once, at the task's end or before a restore makes a new component.
    All return None."""

    def initialize(self, config: dict[str, Any], context: Any) -> None: ...
    def next_tuple(self) -> None: ...
    def ack(self, tup_id: Any) -> None: ...
    def fail(self, tup_id: Any) -> None: ...
    def activate(self) -> None: ...
    def deactivate(self) -> None: ...
    def close(self) -> None: ...


class SinkProtocol(Protocol):
    """A bolt as the engine drives it (heronpy's ``Bolt``; heron_py/runtime/host.py BoltHost).

    - ``initialize(config, context)``: once, before any input.
    - ``process(tup)``: per input tuple (and ``process_tick`` per tick tuple); the bolt acks or
      fails each input itself (at least once), possibly later, from ``heron_poll``.
    - ``cleanup()``: once, at the task's end (read by ``getattr``: optional in heronpy)."""

    def initialize(self, config: dict[str, Any], context: Any) -> None: ...
    def process(self, tup: Any) -> None: ...
    def cleanup(self) -> None: ...


class BatchEmitSource(Protocol):
    """``heron_emit_many(rows, stream)``: the host binds it on the spout after ``initialize``
    returns, only when nothing must see each emit (no task hook, no tap, no serializer) and the
    spout's class declares the attribute; otherwise it stays None and the spout emits per tuple.
    The spout calls it from next_tuple with a poll's rows (each a values list), untracked (no
    message ids). Returns None. Read in ComponentHost.initialize (runtime/host.py)."""

    heron_emit_many: Callable[[list[Any], str], None] | None


class BareBatchEmitSource(Protocol):
    """``heron_emit_one_many(values, stream)``: as ``heron_emit_many``, bound the same way,
    for a one-field stream's tuples given as their bare values (no tuple per value: the
    Streamlet sources' elements; Emitter.emit_one_many)."""

    heron_emit_one_many: Callable[[list[Any], str], None] | None


class TrackedBatchEmitSource(Protocol):
    """``heron_emit_tracked_many(rows, tup_ids)``: as ``heron_emit_many`` but at least once,
    each row with the message id of the same index, on the default stream; bound by
    ``_bind_tracked_fast_paths`` (runtime/host.py) when the class declares the attribute and the
    specialised emit is on; None otherwise (the spout then calls ``emit(row, tup_id=...)``)."""

    heron_emit_tracked_many: Callable[[list[Any], Sequence[Any]], None] | None


class TrackedRunEmitSource(Protocol):
    """``heron_emit_tracked_run(rows, tup_id)``: at least once, every row of the list under one
    message id, on the default stream: one tuple tree, so ``ack(tup_id)`` comes once every row's
    tree completed, and ``fail(tup_id)`` once for the whole run when any row failed or timed out
    (the spout replays what it chooses: at least once allows the run's acked rows again).
    Bound like ``heron_emit_tracked_many`` (``_bind_tracked_fast_paths``, runtime/host.py) when
    the class declares the attribute; None otherwise. ``topology.max.spout.pending`` and the
    spout's acked, failed and timed-out counts count the run's rows, not one."""

    heron_emit_tracked_run: Callable[[list[Any], Any], None] | None


class BatchAckSource(Protocol):
    """``heron_ack_many(tup_ids)``: the engine calls it instead of ``ack`` per id, with a result
    frame's run of acked ids (in their order; a fail in the frame is delivered by ``fail`` in its
    place), when no task hook must see each ack. Same thread as next_tuple. Returns None. Read
    once in ComponentHost.initialize; called by SpoutHost.on_results and acks_due."""

    def heron_ack_many(self, tup_ids: list[Any]) -> None: ...


class WaitingSource(Protocol):
    """``heron_waited``: set by next_tuple, True when that call waited on the source's own
    input (a Kafka consumer's poll timeout). The spout loop reads it after each next_tuple
    (SpoutHost.waited_for_input) and then adds no idle wait of its own. A source must reset it
    to False at the start of every next_tuple."""

    heron_waited: bool


class PolledComponent(Protocol):
    """``heron_poll()``: input of the component's own (a producer's delivery reports, a
    subprocess's commands, a sink's batch deadline); the runner calls it on the task's thread at
    least every ``heron_poll_interval_s`` seconds (read once at initialize, default 0.005), and at
    once after a ``heron_wake``. Returns None. Read in ComponentHost.initialize.

    A component that also defines ``heron_busy`` may name ``heron_idle_poll_interval_s``: while
    ``heron_busy()`` is false the runner calls ``heron_poll`` at least that often instead (a
    producer with no record waiting for its report has nothing to poll for every 5 ms)."""

    heron_poll_interval_s: float

    def heron_poll(self) -> None: ...


class BusyComponent(Protocol):
    """``heron_busy()``: True while inputs are buffered and not yet written or answered; the
    in-process runner (heron_py/testing/runner.py) polls until every component says False.
    Task thread; returns bool."""

    def heron_busy(self) -> bool: ...


class WakeableComponent(Protocol):
    """``heron_wake``: set by the host on a component whose class defines ``heron_poll``, before
    ``initialize``; a callable any thread may call (a reader thread that got input) to have the
    task call ``heron_poll`` now rather than at its next interval (heron_py/multilang/driver.py)."""

    heron_wake: Callable[[], None] | None


class CheckpointedComponent(Protocol):
    """Effectively once (heron_py/runtime/stateful.py; heronpy's ``StatefulComponent``):

    - ``init_state(state)``: before ``initialize``, with the restored checkpoint's state (empty at a
      clean start); a restore after the first closes the component and makes a new one.
    - ``pre_save(checkpoint_id)``: on the task thread between two next_tuple / process calls,
      just before the state is pickled for that checkpoint; the id comes as a string (heronpy).
    A source keeps its positions (the next offset per partition) in the state; nothing past them
    may be committed to the source system until the checkpoint is complete."""

    def init_state(self, stateful_state: State) -> None: ...
    def pre_save(self, checkpoint_id: str) -> None: ...


class CheckpointCommitter(Protocol):
    """``on_checkpoint_complete(checkpoint_id)``: the master's word that every checkpoint up to
    ``checkpoint_id`` is complete (StatefulTask.checkpoint_committed), on the task thread, only
    while processing. A source commits the positions it saved for the newest one at or below it;
    a sink commits what it staged (heron_py/connectors/committing.py). A word may be lost: a
    restore target is complete by definition, so the component commits it itself after a
    restore. Returns None."""

    def on_checkpoint_complete(self, checkpoint_id: int) -> None: ...


class BatchSink(Protocol):
    """``heron_process_batch(values)``: a whole batch of untracked inputs in one call, each
    input's values, when no hook, tap, serializer or auto_ack/auto_fail/auto_anchor needs each
    tuple (BoltHost.initialize). Returns (the outputs to emit on ``heron_batch_stream``, each a
    values sequence; how many inputs failed). With ``heron_batch_one`` True, each input comes
    as its first value, bare, and each output is returned bare: the one value of a tuple on a
    one-field stream (the Streamlet operators: nothing wraps or unwraps a tuple per element);
    ``heron_batch_one`` is read with ``getattr`` (absent: False)."""

    heron_batch_stream: str

    def heron_process_batch(self, values: list[Any]) -> tuple[list[Any], int]: ...
