"""One task's side of effectively once, for any runner that drives a component host.

The runner hands it the master's commands (restore, start processing, start a checkpoint) and,
for a bolt, every tuple batch and checkpoint marker in arrival order. It aligns markers
(``heron_py.checkpoint.alignment``), saves the component's state to the checkpoint storage,
sends markers downstream behind the tuples emitted before them, and reports to the master
through the same sink as the tuples (the stream manager passes the reports on).

The phases: a task waits for its first restore before it runs any user code (heronpy calls
``init_state`` before ``initialize``); a later restore closes the component and makes a new
one (``init_state``, ``initialize`` again, as Heron's instance restarts it), so nothing of the
rolled-back run survives in its attributes; after a restore a spout waits for the master's start,
since only then has every task dropped the old run's data. A bolt processes what reaches it
after its restore at once: the stream managers drop the old run's frames (each connection's
fence), so what comes is the new run's. Its ticks wait for the start, so it emits nothing of
its own before every task restored.
"""

from __future__ import annotations

import enum
import logging
import pickle
import time
from collections.abc import Callable, Sequence
from typing import Any

from heron_py.api.serializer import load_serializer
from heron_py.api.state.state import HashMapState, State
from heron_py.checkpoint.alignment import (
    AlignmentBufferFull,
    AlignmentConfig,
    Deliver,
    Forward,
    MarkerAligner,
    Save,
    SpoutCheckpoint,
)
from heron_py.checkpoint.storage import CheckpointError, CheckpointStorage
from heron_py.common.framing import BATCH_HEADER, HEADER_SIZE, decode_marker, encode_marker
from heron_py.common.wire import encode_msg
from heron_py.planner.keygroups import max_parallelism
from heron_py.planner.model import PhysicalPlan
from heron_py.runtime.host import BoltHost, ComponentHost
from heron_py.runtime.rescale import StateSplitError, rule_of, sources, split
from proto import heron_py_pb2 as pb


class Phase(enum.Enum):
    WAITING_RESTORE = "waiting for restore"  # started: no user code has run
    RESTORED = "restored"  # state loaded; a spout waits for the master's start
    PROCESSING = "processing"


def upstream_tasks(plan: PhysicalPlan, component: str) -> list[int]:
    """Every task of every component this one takes input from: a bolt's input channels."""
    sources = {i.component for i in plan.topology.component(component).inputs}
    return sorted(t.task_id for t in plan.packing.tasks if t.component in sources)


def component_tasks(plan: PhysicalPlan, component: str) -> list[int]:
    return sorted(t.task_id for t in plan.packing.tasks if t.component == component)


def downstream_tasks(plan: PhysicalPlan, component: str) -> list[int]:
    """Every task of every component that takes input from this one: where markers go."""
    sinks = {c.name for c in plan.topology.components if any(i.component == component for i in c.inputs)}
    return sorted(t.task_id for t in plan.packing.tasks if t.component in sinks)


def input_aligner(host: ComponentHost, current: MarkerAligner[bytes] | None,
                  config: AlignmentConfig) -> MarkerAligner[bytes] | None:
    """The marker aligner over the input channels of the host's plan (a bolt's; None for a
    spout or a component without inputs): ``current`` while its channels are the same, else a
    new one (a live rescale's plan added or removed an upstream task)."""
    up = upstream_tasks(host.plan, host.component)
    if host.is_spout or not up:
        return None
    if current is not None and current.channels == frozenset(up):
        return current
    return MarkerAligner(host.task_id, up, config)


def is_stateful(user: Any) -> bool:
    """heronpy's StatefulComponent, or anything with its two methods (duck typing, as heronpy)."""
    return callable(getattr(user, "init_state", None)) and callable(getattr(user, "pre_save", None))


class StateCodec:
    """The state's bytes: the topology's serializer when it names one, else pickle."""

    def __init__(self, class_name: str, conf: Any) -> None:
        self._ser = load_serializer(class_name, conf)

    def dumps(self, state: State) -> bytes:
        items = dict(state.enumerate())
        if self._ser is not None:
            data: bytes = self._ser.serialize(items)
            return data
        return pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)

    def loads(self, data: bytes) -> HashMapState:
        items = self._ser.deserialize(data) if self._ser is not None else pickle.loads(data)
        if not isinstance(items, dict):
            raise ValueError(f"saved state: expected a mapping, found {type(items).__name__}")
        state = HashMapState()
        for k, v in items.items():
            state.put(k, v)
        return state


class StatefulTask:
    def __init__(self, host: ComponentHost, storage: CheckpointStorage, topology: str,
                 send: Callable[[list[bytes]], None], *, align_bytes: int, log: logging.Logger,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.host = host
        self.task_id = host.task_id
        self._storage = storage
        self._topology = topology
        self._send = send
        self._log = log
        self._clock = clock
        self.phase = Phase.WAITING_RESTORE
        self.restore_id = 0
        self.initialized = False
        self.stateful = is_stateful(host.user)
        self.state: State = HashMapState()
        self._codec = StateCodec(host.config.serializer, host.conf)
        self._align = AlignmentConfig(align_bytes)
        self._down = downstream_tasks(host.plan, host.component)
        self.aligner = input_aligner(host, None, self._align)
        self.spout: SpoutCheckpoint | None = SpoutCheckpoint(self.task_id) if host.is_spout else None
        # a bolt's batches go to its host; a spout has none
        self._process_frame: Callable[[bytes], None] = host.process_frame if isinstance(host, BoltHost) \
            else self._no_input
        self.last_saved: tuple[int, int, float] | None = None  # checkpoint id, bytes, seconds
        self.aborted = 0

    @property
    def processing(self) -> bool:
        return self.phase is Phase.PROCESSING

    # --- the master's commands ---
    def restore(self, restore_id: int, checkpoint_id: int) -> None:
        """Drop the old run's in-flight data, load ``checkpoint_id`` (0: empty state) and report."""
        if restore_id < self.restore_id:
            self._log.info("ignoring restore %d: restore %d is newer", restore_id, self.restore_id)
            return
        if self.host.removed:
            # a rescale took this task out of the plan: it has no share of the state, and it
            # exits once its executor stops it (what it still sends is fenced off)
            self._log.info("task %d: not in the plan any more; restore %d is not for it", self.task_id, restore_id)
            return
        self.restore_id = restore_id
        self.host.emitter.discard()  # emitted by the old run, not sent yet
        # a live rescale's plan may have other channels
        self._down = downstream_tasks(self.host.plan, self.host.component)
        self.aligner = input_aligner(self.host, self.aligner, self._align)
        if self.aligner is not None:
            self.aligner.reset()
        if self.spout is not None:
            self.spout.reset()
        try:
            state = self._load(checkpoint_id)
        except Exception as e:  # a corrupt or unreadable file: the master falls back to an older one
            self._log.error("task %d cannot restore checkpoint %d: %s", self.task_id, checkpoint_id, e)
            self._report_restored(ok=False, error=f"{type(e).__name__}: {e}")
            return
        self.state = state
        again = self.initialized
        if again:
            self.host.reset_user()
        if self.stateful:
            self.host.user.init_state(state)
        self.host.initialize()
        self.initialized = True
        if again:
            self.host.start()  # the new component is activated as the first one was
        self.phase = Phase.RESTORED
        what = "a clean start" if checkpoint_id == 0 else f"checkpoint {checkpoint_id}"
        self._log.info("task %d restored %s (restore %d, %d keys of state)", self.task_id, what, restore_id,
                       sum(1 for _ in state.enumerate()))
        self._report_restored(ok=True)

    def start_processing(self, restore_id: int) -> bool:
        """True when this starts the task's processing (the master's start for our restore)."""
        if restore_id != self.restore_id or self.phase is not Phase.RESTORED:
            return False
        self.phase = Phase.PROCESSING
        return True

    def checkpoint_committed(self, checkpoint_id: int) -> None:
        """The master's word that ``checkpoint_id`` is complete: the component's
        ``on_checkpoint_complete(checkpoint_id)``, if it has one, commits what it staged for it
        and for older ones (a sink's writes, a spout's offsets). Only while processing: what a
        restore loaded was committed by the component when it was restored (a checkpoint is a
        restore target only once complete)."""
        if not self.processing:
            return
        hook = getattr(self.host.user, "on_checkpoint_complete", None)
        if callable(hook):
            hook(checkpoint_id)

    def start_checkpoint(self, checkpoint_id: int) -> None:
        """A spout's checkpoint: save between two next_tuple calls, then markers downstream."""
        if self.spout is None or not self.processing:
            return
        self._run(self.spout.on_start_checkpoint(checkpoint_id))

    # --- a bolt's input, in arrival order ---
    def on_batch(self, frame: bytes) -> None:
        if self.aligner is None:
            self._process_frame(frame)
            return
        src: int = BATCH_HEADER.unpack_from(frame, HEADER_SIZE)[1]
        try:
            actions = self.aligner.on_tuples(src, frame, len(frame))
        except AlignmentBufferFull as e:
            # as Heron: give the checkpoint up (the master times it out) rather than stall
            self._log.warning("%s; aborting the checkpoint", e)
            self.aborted += 1
            self._run(self.aligner.abort(str(e)))
            actions = self.aligner.on_tuples(src, frame, len(frame))
        self._run(actions)

    def on_marker(self, frame: bytes) -> None:
        src, cid = decode_marker(frame)
        if self.aligner is None:
            return
        if src not in self.aligner.channels:
            self._log.warning("task %d: a marker from task %d, which is not an input; dropped", self.task_id, src)
            return
        self._run(self.aligner.on_marker(src, cid))

    def _no_input(self, frame: bytes) -> None:
        self._log.warning("task %d: a tuple batch for a spout; dropped", self.task_id)

    def _run(self, actions: Sequence[Any]) -> None:
        for a in actions:
            if isinstance(a, Deliver):
                self._process_frame(a.batch)
            elif isinstance(a, Save):
                self._save(a.checkpoint_id)
            elif isinstance(a, Forward):
                self._forward(a.checkpoint_id)

    # --- saving and reporting ---
    def _save(self, checkpoint_id: int) -> None:
        t0 = self._clock()
        size = 0
        try:
            if self.stateful:
                self.host.user.pre_save(str(checkpoint_id))  # heronpy passes the id as a string
                data = self._codec.dumps(self.state)
                self._storage.save(self._topology, checkpoint_id, self.task_id, data)
                size = len(data)
        except Exception as e:
            # not saved: the master aborts the checkpoint at once (not at its timeout); the task goes on
            self._log.error("task %d could not save checkpoint %d: %s", self.task_id, checkpoint_id, e)
            self._send([encode_msg(pb.CheckpointSaved(
                checkpoint_id=checkpoint_id, task_id=self.task_id, failed=True,
                error=f"{type(e).__name__}: {e}"[:500]))])
            return
        took = self._clock() - t0
        self.last_saved = (checkpoint_id, size, took)
        self._log.debug("task %d saved checkpoint %d (%d bytes, %.1f ms)", self.task_id, checkpoint_id, size,
                        took * 1000)
        self._send([encode_msg(pb.CheckpointSaved(
            checkpoint_id=checkpoint_id, task_id=self.task_id, size_bytes=size,
            duration_secs=took, stored=self.stateful))])

    def _forward(self, checkpoint_id: int) -> None:
        self.host.flush()  # the tuples emitted before the snapshot go ahead of the markers
        if self._down:
            self._send([encode_marker(d, self.task_id, checkpoint_id) for d in self._down])

    def _load(self, checkpoint_id: int) -> State:
        if checkpoint_id == 0 or not self.stateful:
            return HashMapState()
        marker = self._storage.marker(self._topology, checkpoint_id)
        comp = self.host.component
        now = component_tasks(self.host.plan, comp)
        then = sorted(marker.packing[comp]) if marker.packing is not None and comp in marker.packing else None
        if then is None or then == now:
            data = self._storage.load(self._topology, checkpoint_id, self.task_id)
            return HashMapState() if data is None else self._codec.loads(data)
        return self._load_split(checkpoint_id, then, now)

    def _load_split(self, checkpoint_id: int, then: list[int], now: list[int]) -> State:
        """The component's parallelism (or its tasks' ids) changed since the checkpoint: this
        task's share of the old tasks' state (``heron_py.runtime.rescale``)."""
        topo = self.host.plan.topology
        comp = topo.component(self.host.component)
        rule = rule_of(topo, comp.name)
        max_par = max_parallelism(topo.config, comp.config, len(then))
        index = now.index(self.task_id)
        try:
            wanted = sources(rule, index, len(then), len(now), max_par)
            saved = []
            for i in wanted:
                data = self._storage.load(self._topology, checkpoint_id, then[i])
                if data is not None:
                    saved.append((then[i], dict(self._codec.loads(data).enumerate())))
            entries = split(rule, saved, index, len(then), len(now), max_par, comp.name)
        except StateSplitError as e:
            raise CheckpointError(f"checkpoint {checkpoint_id} was taken with component {comp.name!r} on tasks "
                                  f"{then}, which now runs on tasks {now}: {e}; restore a checkpoint taken with "
                                  f"this packing, or start clean (heron-py restore NAME --clean)") from None
        self._log.info("task %d: checkpoint %d's state of %r split from %d to %d tasks (%s): %d keys from tasks %s",
                       self.task_id, checkpoint_id, comp.name, len(then), len(now), rule.value, len(entries),
                       [then[i] for i in wanted])
        state = HashMapState()
        for k, v in entries.items():
            state.put(k, v)
        return state

    def _report_restored(self, *, ok: bool, error: str = "") -> None:
        self._send([encode_msg(pb.StateRestored(
            restore_id=self.restore_id, task_id=self.task_id, ok=ok, error=error))])
