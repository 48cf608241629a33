"""Routing of batch frames to their destination connection, and what to do when there is none.

The forwarder reads only a frame's headers (type, destination task, count) and sends the
same bytes on: a local task's frames go to its instance's connection, another container's
to the outbound connection to that container's stream manager. It owns the policy:

- no connection yet (start-up, a restart): the frame is held, at most ``max_held`` per
  destination (the oldest is dropped and counted), and released in order on connect;
- a connection whose writing is paused (above its high watermark): sent anyway, and the
  backpressure machinery pauses the spouts, unless the topology asked to drop instead
  (``topology.droptuples.upon.backpressure``); then tuple batches, and only those (acks and
  results must arrive, or roots time out), are dropped and counted;
- a task the plan does not have: dropped and counted;
- an ACK_BATCH for one of our spouts is not forwarded: it goes to the ack callback.

Connections are looked up through ``Destinations``, so unit tests use fakes.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from heron_py.common.framing import MsgType, batch_count, batch_dest, frame_type
from stream_manager.backpressure import ConnKey, ConnKind
from stream_manager.routing import RoutingTable

# frames held for a destination that is not connected yet (start-up, restart); beyond
# this the oldest are dropped and counted, so memory stays bounded
MAX_HELD_FRAMES = 4096


class Outlet(Protocol):
    """What the forwarder needs of a connection (``net.Connection`` has it)."""

    @property
    def writing_paused(self) -> bool: ...
    def send(self, frame: bytes) -> None: ...
    def send_many(self, frames: Iterable[bytes]) -> None: ...


class Destinations(Protocol):
    def instance(self, task: int) -> Outlet | None: ...
    def peer(self, container: int) -> Outlet | None: ...


class Forwarder:
    def __init__(self, destinations: Destinations, *, on_ack_batch: Callable[[bytes], None],
                 log: logging.Logger, max_held: int = MAX_HELD_FRAMES) -> None:
        self.routing = RoutingTable(container=-1)
        self.drop_on_backpressure = False
        self.held: dict[ConnKey, collections.deque[bytes]] = {}
        self.tuples_out: dict[ConnKey, int] = {}  # per outbound connection, for the metrics manager
        self.dropped_tuples = 0
        self.dropped_frames = 0
        self._dests = destinations
        self._on_ack_batch = on_ack_batch
        self._log = log
        self._max_held = max_held

    def route(self, frame: bytes) -> None:
        dest = batch_dest(frame)
        ftype = frame_type(frame)
        routing = self.routing
        if routing.is_local(dest):
            if ftype == MsgType.ACK_BATCH:
                if routing.is_local_spout(dest):
                    self._on_ack_batch(frame)
                else:  # acks go to the root's spout; anything else is a peer's bug
                    self.dropped_frames += 1
                    self._log.warning("dropping an ack batch for task %d, which is not a spout", dest)
                return
            self._deliver(ConnKey.task(dest), self._dests.instance(dest), frame, ftype)
            return
        container = routing.container_for(dest)
        if container is None:
            self.dropped_frames += 1
            self._log.warning("dropping a batch for unknown task %d", dest)
            return
        self._deliver(ConnKey.stmgr(container), self._dests.peer(container), frame, ftype)

    def send_to_task(self, task: int, frame: bytes) -> None:
        """A frame this stream manager made (ACK_RESULT): sent, or held until the task connects;
        never dropped for backpressure and not counted as tuples out."""
        conn = self._dests.instance(task)
        if conn is not None:
            conn.send(frame)
        else:
            self.hold(ConnKey.task(task), frame)

    def _deliver(self, key: ConnKey, conn: Outlet | None, frame: bytes, ftype: int) -> None:
        if conn is None:
            self.hold(key, frame)
            return
        if conn.writing_paused and self.drop_on_backpressure and ftype == MsgType.TUPLE_BATCH:
            self.dropped_tuples += batch_count(frame)
            return
        conn.send(frame)
        self.tuples_out[key] = self.tuples_out.get(key, 0) + batch_count(frame)

    def hold(self, key: ConnKey, frame: bytes) -> None:
        q = self.held.get(key)
        if q is None:
            q = self.held[key] = collections.deque()
        if len(q) >= self._max_held:
            old = q.popleft()
            self.dropped_frames += 1
            self.dropped_tuples += batch_count(old)
            self._log.warning("dropped a held batch of %d for %s %d (nobody to deliver to)", batch_count(old),
                              "task" if key.kind is ConnKind.TASK else "peer", key.ident)
        q.append(frame)

    def release(self, key: ConnKey, conn: Outlet) -> None:
        """Sends what was held for ``key`` on its new connection, in the order it arrived."""
        q = self.held.pop(key, None)
        if q:
            conn.send_many(q)

    def held_frames(self) -> int:
        return sum(len(q) for q in self.held.values())
