"""The stream manager's part in effectively once (heron_py/checkpoint/).

It passes the master's commands on (a checkpoint start to the local spouts; a restore and the
start of processing to every local instance) and the instances' reports back (a saved state,
a finished restore). Checkpoint markers need nothing here: they are batch frames, routed by
the forwarder behind the tuples sent before them.

Its own job is the **fence** between the run a restore rolls back and the new one. When the
master orders restore R, frames of the old run are still on their way: in instances'
outbound queues, in our buffers, on the wire between stream managers. Delivered after the
destination restored, such a frame would be counted twice (the spouts replay it). So every
connection that brings tuple batches has a fence, the newest restore after which its frames
are the new run's, and we forward a batch or marker only from a connection whose fence has
reached our newest restore:
- an instance's connection: its StateRestored(R) (the instance sends it after dropping what it
  emitted before R, on the same connection, so what follows is the new run's);
- a peer stream manager's connection: its RestoreFence(R), which it sends on every outbound
  connection when it takes R, and first thing on a new connection.
What a fence stops is dropped and counted (``__dropped-tuples``, reason ``restore``).

Fences are kept per connection, never per (role, id): a connection that closes, or an
instance that registers again on a new one, leaves no fence behind and takes none from its
successor, which is fenced until it says so itself.

And in-flight data lost (``loss``) asks the master to roll every task back, until it answers
(``losses``: stream_manager/losses.py).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from heron_py.common.net import Connection, Route, on, relay
from heron_py.common.wire import encode_msg
from proto import heron_py_pb2 as pb
from stream_manager.losses import LossReport


class CheckpointRelay:
    def __init__(self, container: int, log: logging.Logger, *, to_master: Callable[[bytes], None],
                 instances: Callable[[], Iterable[Connection]], instance: Callable[[int], Connection | None],
                 local_spouts: Callable[[], Iterable[int]], peers: Callable[[], Iterable[Connection]],
                 discard_held: Callable[[Iterable[Connection]], int]) -> None:
        self.container = container
        self._log = log
        self.to_master = to_master  # an instance's report is relayed as it came
        self._instances = instances
        self._instance = instance
        self._local_spouts = local_spouts
        self._peers = peers
        self._discard_held = discard_held
        self.restore_id = 0  # the newest restore we took; 0: none (no fence applies)
        self.restoring = False  # between a restore and its start of processing
        self._restore_frame: bytes | None = None
        self._fences: dict[Connection, int] = {}  # a connection -> the newest restore it fenced
        self.fenced_frames = 0  # dropped by a fence, for the log
        self.losses = LossReport(container, log, to_master)

    # --- the hot path: one call per tuple batch or marker while a restore id is set ---
    def admits(self, conn: Connection) -> bool:
        if self._fences.get(conn, 0) >= self.restore_id:
            return True
        self.fenced_frames += 1
        return False

    # --- from the master ---
    def master_routes(self) -> list[Route]:
        """The master's effectively-once commands, on the stream manager's link to it."""
        return [relay("tmanager", pb.StartCheckpoint, self.start_checkpoint),
                on("tmanager", pb.RestoreState, self.on_restore),
                on("tmanager", pb.StartProcessing, self.on_start_processing),
                on("tmanager", pb.RollbackAnswer, lambda conn, msg: self.losses.on_answer(msg)),
                relay("tmanager", pb.CheckpointCommitted, self.checkpoint_committed)]

    def start_checkpoint(self, conn: Connection, frame: bytes) -> None:
        """To the local spouts, as it came (they decode it)."""
        for task in self._local_spouts():
            dest = self._instance(task)
            if dest is not None:
                dest.send(frame)

    def checkpoint_committed(self, conn: Connection, frame: bytes) -> None:
        """To every local instance, as it came (a sink commits what it staged for it)."""
        for dest in self._instances():
            dest.send(frame)

    def on_restore(self, conn: Connection, msg: pb.RestoreState) -> None:
        self._restore(msg, encode_msg(msg))

    def on_start_processing(self, conn: Connection, go: pb.StartProcessing) -> None:
        if go.restore_id != self.restore_id:
            self._log.info("ignoring the start of restore %d: restore %d is newer", go.restore_id,
                           self.restore_id)
            return
        self.restoring = False
        frame = encode_msg(go)
        for dest in self._instances():
            dest.send(frame)
        self._log.info("restore %d done everywhere: processing (old-run frames fenced off: %d)",
                       go.restore_id, self.fenced_frames)

    def _restore(self, msg: pb.RestoreState, frame: bytes) -> None:
        if msg.restore_id <= self.restore_id:
            self._log.info("ignoring restore %d: restore %d is newer or the same", msg.restore_id, self.restore_id)
            return
        self.restore_id = msg.restore_id
        self.restoring = True
        self._restore_frame = frame
        self.fenced_frames = 0
        self.losses.on_restore(msg.restore_id)
        dropped = self._discard_held(self._instances())  # and what the instances' connections hold back
        fence = self.fence_frame()
        assert fence is not None
        for peer in self._peers():
            peer.send(fence)
        for conn in self._instances():
            conn.send(frame)
        what = "a clean start" if msg.checkpoint_id == 0 else f"checkpoint {msg.checkpoint_id}"
        self._log.info("restore %d to %s (%s): %d held frames of the old run dropped", msg.restore_id, what,
                       msg.reason, dropped)

    def fence_frame(self) -> bytes | None:
        """What a new outbound connection to a peer sends first (None before any restore)."""
        if not self.restore_id:
            return None
        return encode_msg(pb.RestoreFence(container=self.container, restore_id=self.restore_id))

    # --- from instances and peers ---
    def on_state_restored(self, conn: Connection, msg: pb.StateRestored) -> None:
        """An instance restored: its connection's fence moves on; the report goes to the master."""
        ident = conn.identity
        if ident is not None and msg.ok and str(msg.task_id) == ident.peer_id:
            self._fences[conn] = max(self._fences.get(conn, 0), msg.restore_id)
        self.to_master(encode_msg(msg))

    def on_peer_fence(self, conn: Connection, msg: pb.RestoreFence) -> None:
        ident = conn.identity
        if ident is None or ident.peer_id != str(msg.container):
            self._log.warning("a restore fence for container %d on the connection of %s; ignored", msg.container,
                              ident.peer_id if ident else "?")
            return
        self._fences[conn] = max(self._fences.get(conn, 0), msg.restore_id)

    def on_instance_registered(self, conn: Connection, task: int) -> None:
        """A (new or reconnected) instance: its connection has no fence yet; mid-restore it is
        told to restore too."""
        if self.restoring and self._restore_frame is not None:
            conn.send(self._restore_frame)

    def on_closed(self, conn: Connection) -> None:
        """A connection closed: its fence goes with it (a successor is fenced on its own)."""
        self._fences.pop(conn, None)

    def loss(self, reason: str) -> bool:
        """In-flight data of the current run was lost: the master is asked to roll every task
        back (``LossReport``). Returns whether it was asked now."""
        return self.losses.loss(self.restore_id, reason)
