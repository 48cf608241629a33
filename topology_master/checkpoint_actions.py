"""The coordinator's actions carried out on the master: the commands to every stream manager, the
storage's changes (through ``CompletedCheckpoints``, topology_master/checkpoint_store.py), the
log lines and the page's state. It decides nothing (the coordinator did,
heron_py/checkpoint/coordinator.py) and reads no clock.

It keeps the last restore and checkpoint start it sent: a stream manager that registers in the
middle of either missed it, and only the commands' sender knows their bytes."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable

from google.protobuf.message import Message

from heron_py.checkpoint.action_log import log_line
from heron_py.checkpoint.coordinator import (
    CheckpointCommitted,
    CheckpointComplete,
    CheckpointCoordinator,
    CheckpointDiscarded,
    CheckpointsFailing,
    CheckpointsRecovered,
    CoordinatorAction,
    CoordinatorState,
    RestoreFailed,
    StartCheckpoint,
    StartProcessing,
    StartRestore,
)
from heron_py.common.net import Connection
from heron_py.common.wire import encode_msg
from proto import heron_py_pb2 as pb
from topology_master.checkpoint_store import CompletedCheckpoints

# the actions that change what the page shows (waiting for the operator, failing, recovered,
# processing again): the master writes its execution state after them
PAGE_CHANGES = (CheckpointsFailing, CheckpointsRecovered, RestoreFailed, StartProcessing, StartRestore)


class ActionRunner:
    def __init__(self, store: CompletedCheckpoints, *, rid_base: int, send_all: Callable[[bytes], None],
                 log: logging.Logger, state_changed: Callable[[], None],
                 marked: Callable[[CheckpointComplete, BaseException | None], None]) -> None:
        """``rid_base``: this master's epoch in the high bits of a restore id on the wire.
        ``marked``: the driver, told a checkpoint's marker is durable (or failed)."""
        self._store = store
        self._rid_base = rid_base
        self._send_all = send_all
        self._log = log
        self._state_changed = state_changed
        self._marked = marked
        self._restore_frame: bytes | None = None  # the restore under way, for late stream managers
        self._start_frame: tuple[int, bytes] | None = None  # the checkpoint under way, for stream managers back

    def apply(self, actions: Iterable[CoordinatorAction]) -> None:
        changed = False
        for a in actions:
            changed |= isinstance(a, PAGE_CHANGES)
            line = log_line(a)
            if line is not None:  # before the action: a restore's line precedes its commands
                self._log.log(line[0], "%s", line[1])
            if isinstance(a, StartCheckpoint):
                frame = encode_msg(pb.StartCheckpoint(checkpoint_id=a.checkpoint_id))
                self._start_frame = (a.checkpoint_id, frame)
                self._send_all(frame)
            elif isinstance(a, CheckpointComplete):
                self._store.mark(a.checkpoint, functools.partial(self._marked, a))
            elif isinstance(a, CheckpointCommitted):
                self._store.committed(a.checkpoint_id)
                # every task commits what it staged for it (sinks, a spout's offsets)
                self._send(pb.CheckpointCommitted(checkpoint_id=a.checkpoint_id))
                self._store.collect(a.protect)
            elif isinstance(a, CheckpointDiscarded):
                self._store.discard(a.checkpoint_id)
            elif isinstance(a, StartRestore):
                self._restore_frame = encode_msg(pb.RestoreState(
                    restore_id=self._rid_base + a.restore_id, checkpoint_id=a.checkpoint_id or 0,
                    reason=a.reason))
                self._send_all(self._restore_frame)
            elif isinstance(a, StartProcessing):
                self._send(pb.StartProcessing(restore_id=self._rid_base + a.restore_id))
        if changed:
            self._state_changed()

    def greet(self, conn: Connection, c: CheckpointCoordinator) -> None:
        """A stream manager registered: mid-restore it gets the restore (its tasks are waited for);
        mid-checkpoint it gets the checkpoint's start, which it may have missed while it was
        away (its spouts would never start it, and the checkpoint would wait out its timeout
        while the sinks' staged writes grow); a spout that started it already ignores it."""
        if c.state is CoordinatorState.RESTORING and self._restore_frame is not None:
            conn.send(self._restore_frame)
        elif (c.state is CoordinatorState.CHECKPOINTING and self._start_frame is not None
              and c.status().in_progress_id == self._start_frame[0]):
            conn.send(self._start_frame[1])

    @staticmethod
    def answer(restore_id: int, *, acted: bool, reason: str) -> bytes:
        """The answer to a stream manager's rollback request."""
        return encode_msg(pb.RollbackAnswer(restore_id=restore_id, acted=acted, reason=reason))

    def _send(self, msg: Message) -> None:
        self._send_all(encode_msg(msg))
