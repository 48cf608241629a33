"""Routing of batch frames to their destination connection, and what to do when there is none.

The forwarder reads only a frame's headers (type, destination task, count) and sends the
same bytes on: a local task's frames go to its instance's connection, another container's
to the outbound connection to that container's stream manager. It owns the policy:

- no connection yet (start-up, a restart): the frame is held and released in order on
  connect. Above the high watermark a destination's held frames count as a slow connection (the
  spouts pause); at most ``max_held`` frames and ``max_held_bytes`` (``held_bound()``) per
  destination and ``max_held_total_bytes`` (twice that) in all are kept: past them the oldest
  are dropped and counted;
- a connection whose writing is paused (above its high watermark): sent anyway, and the
  backpressure machinery pauses the spouts, unless the topology asked to drop instead
  (``topology.droptuples.upon.backpressure``); then tuple batches, and only those (acks and
  results must arrive, or roots time out), are dropped and counted;
- a task the plan does not have: dropped and counted;
- no physical plan yet (a restarted stream manager whose instances kept running): every
  frame is held, up to ``max_unplanned_bytes`` in all (``held_bound()`` of the default high
  watermark: the topology's own is in the plan), and routed when the plan comes
  (``set_routing``), so a restart loses nothing that fits;
- an ACK_BATCH for one of our spouts is not forwarded: it goes to the ack callback.

Every drop is counted under its reason (``DropReason``): the metrics export each as
``__dropped-tuples/<reason>``, so no drop is silent.

Connections are looked up through ``Destinations``, so unit tests use fakes.
"""

from __future__ import annotations

import collections
import enum
import logging
from collections.abc import Callable, Iterable
from typing import Protocol

from heron_py.common.config import StreamManagerConfig
from heron_py.common.framing import MsgType, batch_count, batch_dest, frame_type
from heron_py.common.held_output import partition
from stream_manager.backpressure import ConnKey, ConnKind
from stream_manager.routing import RoutingTable

# frames held for a destination that is not connected yet (start-up, restart); beyond
# this the oldest are dropped and counted, so memory stays bounded
MAX_HELD_FRAMES = 4096
# ... and in bytes (a count alone lets 4096 frames of 16 MiB each sit outside the watermarks):
# the spouts pause once a destination holds more than the high watermark, and it keeps twice
# that, the rest for what was already on its way (peers' frames, bolts' outputs); at least
# MIN_HELD_BYTES whatever the watermark, since part of what is on its way sits in the peers'
# TCP buffers (a few MB), so a start-up with small watermarks does not drop what the spouts sent
# before their bolts' instances registered. All destinations together keep twice one's bound;
# the frames held before the first physical plan (all destinations together), one bound.
HELD_HIGHS = 2
MIN_HELD_BYTES = 32 * 1024 * 1024


class DropReason(enum.Enum):
    """Why a frame was dropped: the label of ``__dropped-tuples``."""

    BACKPRESSURE = "backpressure"  # droptuples mode, a connection above its high watermark
    HELD_OVERFLOW = "held-overflow"  # a destination down longer than its hold bound allows
    NO_PLAN_OVERFLOW = "no-plan-overflow"  # more arrived before the first plan than is held
    UNKNOWN_TASK = "unknown-task"  # a task the plan does not have
    NOT_A_SPOUT = "ack-not-for-a-spout"  # an ack batch addressed to a bolt (a peer's bug)
    # effectively once: the run before a restore (its state is rolled back; spouts replay)
    OLD_RUN = "restore"


class Outlet(Protocol):
    """What the forwarder needs of a connection (``net.Connection`` has it)."""

    @property
    def writing_paused(self) -> bool: ...
    def send(self, frame: bytes) -> None: ...
    def send_many(self, frames: Iterable[bytes]) -> None: ...


class Holding(Protocol):
    """A connection that holds back what its transport has no room for (``net.Connection``
    with ``hold_output``): what it holds can still be dropped."""

    def drop_held(self, is_dropped: Callable[[bytes], bool]) -> list[bytes]: ...


class Destinations(Protocol):
    def instance(self, task: int) -> Outlet | None: ...
    def peer(self, container: int) -> Outlet | None: ...


class Forwarder:
    def __init__(self, destinations: Destinations, *, log: logging.Logger, routing: RoutingTable | None = None,
                 on_ack_batch: Callable[[bytes], None] = lambda frame: None,
                 on_held: Callable[[ConnKey, bool], None] = lambda key, high: None,
                 on_loss: Callable[[str], None] = lambda reason: None, max_held: int = MAX_HELD_FRAMES,
                 max_unplanned_bytes: int | None = None, max_held_bytes: int | None = None,
                 max_held_total_bytes: int | None = None) -> None:
        """``routing``: the table until the first plan's (``set_routing``); ``on_held(key, high)``:
        what is held for ``key`` crossed the high watermark (up or down); ``on_loss(reason)``: in-flight
        data was dropped, said in words. The byte bounds, when not given, follow the high watermark
        as each plan sets it (``held_high``; ``held_bound``)."""
        self.routing = routing if routing is not None else RoutingTable(container=-1)
        self.drop_on_backpressure = False
        self.held: dict[ConnKey, collections.deque[bytes]] = {}
        self.held_bytes: dict[ConnKey, int] = {}
        self.held_total_bytes = 0
        self.tuples_out: dict[ConnKey, int] = {}  # per outbound connection, for the metrics manager
        # tuples (records, for ack batches) and frames dropped, by reason
        self.drops: dict[DropReason, int] = {r: 0 for r in DropReason}
        self.dropped_frames = 0
        self.unplanned: collections.deque[bytes] = collections.deque()  # before the first plan
        self.unplanned_bytes = 0
        self._dests = destinations
        # an ack batch for one of our spouts goes to the ack tracker, which sends its results back
        # through this forwarder: the composition root (wiring.py) closes that cycle with
        # ack_batches_to, once the tracker exists
        self.on_ack_batch = on_ack_batch
        self._log = log
        self._max_held = max_held
        self._max_unplanned = max_unplanned_bytes
        self._max_held_bytes = max_held_bytes
        self._max_held_total = max_held_total_bytes
        # frames held for a destination count toward backpressure like a socket's buffer: above
        # the high watermark (set from the plan) the destination is slow until released, so the
        # spouts pause before the hold bound drops anything (a spout that starts before its
        # bolt's instance registered would otherwise fill the hold at once)
        self.held_high = StreamManagerConfig().high_watermark
        self.on_held = on_held
        # a drop of in-flight data (any reason but a restore's fence): effectively once rolls back
        self.on_loss = on_loss
        self._held_slow: set[ConnKey] = set()
        # tasks a live rescale removed -> their container: a batch sent to one under the old plan
        # (in flight at the switch) still reaches it while it runs, as its leftover queue does
        # (task ids are never reused, so this cannot route a new task's frames)
        self._retired: dict[int, int] = {}

    @property
    def dropped_tuples(self) -> int:
        return sum(self.drops.values())

    def drop(self, reason: DropReason, frame: bytes) -> None:
        self.drops[reason] += batch_count(frame)
        self.dropped_frames += 1
        if reason is not DropReason.OLD_RUN:
            self.on_loss(f"frames dropped ({reason.value})")

    def ack_batches_to(self, on_ack_batch: Callable[[bytes], None]) -> None:
        """Where an ack batch for one of our spouts goes from now on: the ack service, which
        sends its results back through this forwarder (``send_to_task``) and so can only be
        made after it. The composition root (wiring.py) closes that cycle with this call, once,
        before any frame comes; a constructor argument could not name a service not made yet."""
        self.on_ack_batch = on_ack_batch

    def local_spouts(self) -> frozenset[int]:
        """The spouts of this container in the current plan's table (``set_routing`` replaces it
        with each plan): for the parts that ask now and then (the checkpoint relay)."""
        return self.routing.local_spouts

    def set_routing(self, routing: RoutingTable) -> None:
        """A new plan's table; frames that came before the first plan are routed now, in order."""
        old = self.routing.container_of
        self._retired.update((t, c) for t, c in old.items() if t not in routing.container_of)
        self.routing = routing
        if routing.container_of and self.unplanned:
            waiting, self.unplanned, self.unplanned_bytes = self.unplanned, collections.deque(), 0
            self._log.info("routing %d frames that arrived before the physical plan", len(waiting))
            for frame in waiting:
                self.route(frame)

    def route(self, frame: bytes) -> None:
        routing = self.routing
        if not routing.container_of:  # no plan yet: hold, rather than drop, until it comes
            self._hold_unplanned(frame)
            return
        dest = batch_dest(frame)
        ftype = frame_type(frame)
        if routing.is_local(dest):
            if ftype == MsgType.ACK_BATCH:
                if routing.is_local_spout(dest):
                    self.on_ack_batch(frame)
                else:  # acks go to the root's spout; anything else is a peer's bug
                    self.drop(DropReason.NOT_A_SPOUT, frame)
                    self._log.warning("dropping an ack batch for task %d, which is not a spout", dest)
                return
            self._deliver(ConnKey.task(dest), self._dests.instance(dest), frame, ftype)
            return
        container = routing.container_for(dest)
        if container is None:
            container = self._retired.get(dest) if ftype != MsgType.ACK_BATCH else None
            removed = self._dests.instance(dest) if container == routing.container else None
            if removed is not None:  # a removed task still running here: its leftovers
                self._deliver(ConnKey.task(dest), removed, frame, ftype)
                return
            if container is None or container == routing.container:
                self.drop(DropReason.UNKNOWN_TASK, frame)
                self._log.warning("dropping a batch for unknown task %d", dest)
                return
        self._deliver(ConnKey.stmgr(container), self._dests.peer(container), frame, ftype)

    def held_bound(self) -> int:
        """Bytes held for one destination (and before the first plan) past which the oldest go."""
        return max(HELD_HIGHS * self.held_high, MIN_HELD_BYTES)

    def _hold_unplanned(self, frame: bytes) -> None:
        self.unplanned.append(frame)
        self.unplanned_bytes += len(frame)
        bound = self._max_unplanned or self.held_bound()
        while self.unplanned_bytes > bound:
            old = self.unplanned.popleft()
            self.unplanned_bytes -= len(old)
            self.drop(DropReason.NO_PLAN_OVERFLOW, old)

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
            self.drops[DropReason.BACKPRESSURE] += batch_count(frame)  # a policy, not a fault: frames not counted
            return
        conn.send(frame)
        self.tuples_out[key] = self.tuples_out.get(key, 0) + batch_count(frame)

    def hold(self, key: ConnKey, frame: bytes) -> None:
        q = self.held.get(key)
        if q is None:
            q = self.held[key] = collections.deque()
        size = len(frame)
        q.append(frame)
        self.held_bytes[key] = self.held_bytes.get(key, 0) + size
        self.held_total_bytes += size
        if key not in self._held_slow and self.held_bytes[key] > self.held_high:
            self._held_slow.add(key)
            self.on_held(key, True)
        # the oldest of this destination go first: the newest are the likeliest still wanted
        per_dest = self._max_held_bytes or self.held_bound()
        total = self._max_held_total or 2 * self.held_bound()
        while q and (len(q) > self._max_held or self.held_bytes[key] > per_dest or self.held_total_bytes > total):
            old = q.popleft()
            self.held_bytes[key] -= len(old)
            self.held_total_bytes -= len(old)
            self.drop(DropReason.HELD_OVERFLOW, old)
            self._log.warning("dropped a held batch of %d for %s %d (nobody to deliver to)", batch_count(old),
                              "task" if key.kind is ConnKind.TASK else "peer", key.ident)

    def release(self, key: ConnKey, conn: Outlet) -> None:
        """Sends what was held for ``key`` on its new connection, in the order it arrived."""
        q = self.held.pop(key, None)
        self.held_total_bytes -= self.held_bytes.pop(key, 0)
        if key in self._held_slow:
            # before the send: the connection's own buffer then says whether it stays slow
            self._held_slow.discard(key)
            self.on_held(key, False)
        if q:
            conn.send_many(q)

    def held_frames(self) -> int:
        return sum(len(q) for q in self.held.values()) + len(self.unplanned)

    def discard_old_run(self, holding: Iterable[Holding] = ()) -> int:
        """Effectively once, at a restore: the held tuple batches and markers belong to the run
        the restore rolls back, so they go (counted); other frames (acks, results) stay. Held
        here, for a destination not connected, and held back by the ``holding`` connections
        (the local instances'), which the restore command would otherwise wait behind. Returns
        the frames dropped."""
        from_conns = 0
        for conn in holding:
            for f in conn.drop_held(is_old_run):
                self.drop(DropReason.OLD_RUN, f)
                from_conns += 1
        before = self.held_frames()
        for key, q in list(self.held.items()):
            keep, old = _split_old_run(q)
            self.held[key] = keep
            for f in old:
                self.drop(DropReason.OLD_RUN, f)
            # the byte bounds of hold() count what is held: keep them true
            size = sum(len(f) for f in keep)
            self.held_total_bytes += size - self.held_bytes.get(key, 0)
            self.held_bytes[key] = size
        self.unplanned, old = _split_old_run(self.unplanned)
        for f in old:
            self.drop(DropReason.OLD_RUN, f)
        self.unplanned_bytes = sum(len(f) for f in self.unplanned)
        return from_conns + before - self.held_frames()


def is_old_run(frame: bytes) -> bool:
    """A tuple batch or checkpoint marker: what a restore rolls back."""
    return frame_type(frame) in (MsgType.TUPLE_BATCH, MsgType.CKPT_MARKER)


def _split_old_run(frames: Iterable[bytes]) -> tuple[collections.deque[bytes], list[bytes]]:
    """``frames`` without the tuple batches and markers (what a restore rolls back), and those."""
    return partition(frames, is_old_run)
