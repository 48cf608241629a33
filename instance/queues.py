"""The two bounded one-way queues between the gateway thread and the execution thread.

Inbound (gateway -> execution) carries ``(InKind, payload)`` items; outbound (execution ->
gateway) carries lists of encoded frames, one list per flush. Each queue is bounded in items
by ``queue.Queue`` and in bytes by a ``QueueBytes`` pair of counters.
"""

from __future__ import annotations

import collections
import enum
import queue
import time
from collections.abc import Callable
from typing import Any


class InKind(enum.Enum):
    BATCH = "batch"  # a TUPLE_BATCH frame for this bolt
    ACKS = "acks"  # an ACK_RESULT frame for this spout
    PPLAN = "pplan"  # a physical plan (JSON bytes)
    WAKE = "wake"  # a component's own input arrived (heron_poll): poll now
    # effectively once (heron_py/runtime/stateful.py)
    MARKER = "marker"  # a CKPT_MARKER frame, in order with the batches
    CKPT_START = "checkpoint"  # a spout: save now (payload: checkpoint id)
    RESTORE = "restore"  # (restore id, checkpoint id; 0: clean)
    START = "start"  # restore id: every task restored, process


InItem = tuple[InKind, Any]


class QueueBytes:
    """Bytes in a queue, without a lock: ``put`` is written only by the producing thread and
    ``taken`` only by the consuming one, so each counter has one writer."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.put = 0
        self.taken = 0

    @property
    def depth(self) -> int:
        return self.put - self.taken


class Outbox:
    """The execution thread's end of the outbound queue.

    A bolt's flush waits for room (that is how backpressure reaches a bolt); a spout never
    blocks inside ``emit``: what does not fit is held here, and the spout loop stops calling
    ``next_tuple`` until it has gone out (``push_held``)."""

    def __init__(self, out: queue.Queue[list[bytes]], out_bytes: QueueBytes, wake: Callable[[], None], *,
                 clock: Callable[[], float] = time.monotonic, hold: bool = False) -> None:
        self._out = out
        self.bytes = out_bytes
        self._wake = wake
        self._clock = clock
        self.hold = hold  # a spout's outbox holds; set once the component is known
        self.held: list[list[bytes]] = []
        self.time_blocked_s = 0.0
        self.stopping = False

    def qsize(self) -> int:
        return self._out.qsize()

    def try_put(self, frames: list[bytes], size: int) -> bool:
        b = self.bytes
        if b.depth + size > b.limit and self._out.qsize():
            return False  # over the byte bound (one item always fits, however large)
        try:
            self._out.put_nowait(frames)
        except queue.Full:
            return False
        b.put += size
        return True

    def send(self, frames: list[bytes]) -> None:
        """The emitter's sink."""
        if self.hold:
            self.held.append(frames)
            self.push_held()
        else:
            self._send_blocking(frames)

    def push_held(self) -> bool:
        """Moves held frames to the outbound queue; True when none is left."""
        held = self.held
        while held:
            if not self.try_put(held[0], sum(len(f) for f in held[0])):
                self._wake()
                return False
            held.pop(0)
        self._wake()
        return True

    def _send_blocking(self, frames: list[bytes]) -> None:
        """Waits for room (the gateway is behind or the stream manager stopped reading us);
        stays stoppable."""
        size = sum(len(f) for f in frames)
        if not self.try_put(frames, size):
            t0 = self._clock()
            while not self.try_put(frames, size):
                self._wake()
                if self.stopping:
                    return
                time.sleep(0.001)
            self.time_blocked_s += self._clock() - t0
        self._wake()


class Inbox:
    """The gateway's end of the inbound queue. When the queue is full (in items or bytes) the
    item waits in an overflow list, the socket stops being read (TCP then pushes back to the
    stream manager) and a short timer retries; order is kept."""

    def __init__(self, inbound: queue.Queue[InItem], in_bytes: QueueBytes, *,
                 pause: Callable[[], None], resume: Callable[[], None],
                 call_later: Callable[[float, Callable[[], None]], Any], retry_s: float = 0.001) -> None:
        self._in = inbound
        self.bytes = in_bytes
        self._pause = pause
        self._resume = resume
        self._call_later = call_later
        self._retry_s = retry_s
        self.overflow: collections.deque[InItem] = collections.deque()

    def deliver(self, item: InItem) -> None:
        if self.overflow:
            self.overflow.append(item)
            return
        if not self._try_put(item):
            self.overflow.append(item)
            self._pause()
            self._call_later(self._retry_s, self.retry)

    def _try_put(self, item: InItem) -> bool:
        batch = item[0] is InKind.BATCH
        if batch and self.bytes.depth >= self.bytes.limit:
            return False
        try:
            self._in.put_nowait(item)
        except queue.Full:
            return False
        if batch:
            self.bytes.put += len(item[1])
        return True

    def retry(self) -> None:
        while self.overflow:
            if not self._try_put(self.overflow[0]):
                self._call_later(self._retry_s, self.retry)
                return
            self.overflow.popleft()
        self._resume()
