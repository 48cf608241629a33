"""The two bounded one-way queues between the gateway thread and the execution thread.

Inbound (gateway -> execution) carries ``(InKind, payload)`` items; outbound (execution ->
gateway) carries lists of encoded frames, one list per flush. The inbound queue is bounded in
items by ``queue.Queue`` and in bytes by a ``QueueBytes`` pair of counters. The outbound queue
is an ``OutQueue``: it is bounded in items and bytes under its own lock, so a sender waiting
for room sleeps on the queue's condition and is woken by the gateway's take, not by a timer.
"""

from __future__ import annotations

import collections
import enum
import queue
import time
from collections.abc import Callable, Iterable
from typing import Any

from heron_py.common.frameauth import TAG_SIZE
from heron_py.common.framing import MsgType, batch_count, frame_type


class InKind(enum.Enum):
    BATCH = "batch"  # a TUPLE_BATCH frame for this bolt
    ACKS = "acks"  # an ACK_RESULT frame for this spout
    PPLAN = "pplan"  # a physical plan (JSON bytes)
    WAKE = "wake"  # a component's own input arrived (heron_poll): poll now
    ROOM = "room"  # the outbound queue has room again: a spout's held frames can go
    # effectively once (heron_py/runtime/stateful.py)
    MARKER = "marker"  # a CKPT_MARKER frame, in order with the batches
    CKPT_START = "checkpoint"  # a spout: save now (payload: checkpoint id)
    RESTORE = "restore"  # (restore id, checkpoint id; 0: clean)
    START = "start"  # restore id: every task restored, process
    COMMITTED = "committed"  # checkpoint id: complete, commit what was staged for it


InItem = tuple[InKind, Any]

# A blocked sender looks at its stop deadline at least this often. It is only a safety net:
# room wakes the sender through the queue's condition (a signal handler cannot notify a
# condition safely: the interrupted thread may hold its lock).
SAFETY_WAIT_S = 0.25

# Where the connection to the stream manager stands: (the connection, as a token; bytes sent
# to it in all; bytes of those not written to its socket yet), or None when there is none.
WireMark = tuple[object, int, int]


class WireLedger:
    """The flushes the gateway handed to its connection that may not be written yet, with
    their place in the connection's byte stream (``Connection.bytes_out`` before the send).
    At a stop, the bytes the connection has not written are the end of that stream, so the
    frames that end past the written point are known exactly, however the gateway's own
    messages (metrics, pings) are interleaved. Flushes already written are forgotten at each
    take, so the ledger holds about one socket buffer (the gateway's write mark) of them."""

    def __init__(self) -> None:
        # (connection, start offset, ((wire bytes, tuples) per frame), end offset)
        self._flushes: collections.deque[tuple[object, int, tuple[tuple[int, int], ...], int]] = (
            collections.deque())

    def note(self, mark: WireMark, flush: list[bytes]) -> None:
        conn, sent, unsent = mark
        written = sent - unsent
        q = self._flushes
        while q and (q[0][0] is not conn or q[0][3] <= written):
            q.popleft()  # written, or on a connection that is gone (its loss is not a stop's)
        frames = tuple((len(f) + TAG_SIZE, tuples_in_frame(f)) for f in flush)
        q.append((conn, sent, frames, sent + sum(w for w, _ in frames)))

    def unwritten(self, mark: WireMark | None) -> tuple[int, int]:
        """(tuples, frames) handed to the connection ``mark`` describes and not (wholly)
        written: a frame cut short is lost as well."""
        if mark is None:
            return 0, 0
        conn, sent, unsent = mark
        written = sent - unsent
        tuples = frames = 0
        for c, start, flush, end in self._flushes:
            if c is not conn or end <= written:
                continue
            for wire, n in flush:
                start += wire
                if start > written:
                    tuples += n
                    frames += 1
        return tuples, frames


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


class OutQueue(queue.Queue[list[bytes]]):
    """The outbound queue: at most ``maxsize`` flushes and ``max_bytes`` bytes (one flush
    always fits, however large). Its byte depth is kept under the queue's own lock, so a
    sender that ``offer``s with a timeout waits on ``not_full``, which every take notifies.

    ``on_room``, when armed with ``want_room``, is called once (on the taking thread, outside
    the lock) after the next take: a spout that waits on its inbound queue is woken by it."""

    def __init__(self, maxsize: int, max_bytes: int, *, mark: Callable[[], WireMark | None] | None = None) -> None:
        """``mark()``: where the gateway's connection stands (``GatewayPort.wire_mark``), read at
        each take (the gateway sends what it took right after taking it, on the same thread) and
        at the shutdown drain's end; None: no ledger is kept (a queue without a gateway)."""
        super().__init__(maxsize)
        self.max_bytes = max_bytes
        self.depth_bytes = 0  # guarded by self.mutex
        self.on_room: Callable[[], None] | None = None
        self._room_wanted = False
        self.room_signals = 0  # on_room calls (tests count wake-ups with it)
        self.waits = 0  # times an offer slept on the condition
        self.mark = mark
        self.ledger = WireLedger()

    # queue.Queue's storage hooks, called with self.mutex held
    def _init(self, maxsize: int) -> None:
        self.queue: collections.deque[list[bytes]] = collections.deque()
        self._sizes: collections.deque[int] = collections.deque()

    def _put(self, item: list[bytes]) -> None:
        self._append(item, sum(map(len, item)))

    def _append(self, item: list[bytes], size: int) -> None:
        self.queue.append(item)
        self._sizes.append(size)
        self.depth_bytes += size

    def _get(self) -> list[bytes]:
        self.depth_bytes -= self._sizes.popleft()
        return self.queue.popleft()

    def _fits(self, size: int) -> bool:
        n = len(self.queue)
        if not n:
            return True
        return (self.maxsize <= 0 or n < self.maxsize) and self.depth_bytes + size <= self.max_bytes

    def offer(self, frames: list[bytes], size: int, timeout: float = 0.0) -> bool:
        """Puts ``frames`` (``size`` bytes) if there is room, waiting up to ``timeout`` for it;
        False when there was none."""
        with self.not_full:
            if not self._fits(size):
                if timeout <= 0:
                    return False
                end = time.monotonic() + timeout
                while not self._fits(size):
                    left = end - time.monotonic()
                    if left <= 0:
                        return False
                    self.waits += 1
                    self.not_full.wait(left)
            self._append(frames, size)
            self.unfinished_tasks += 1
            self.not_empty.notify()
            return True

    def get(self, block: bool = True, timeout: float | None = None) -> list[bytes]:
        item = super().get(block, timeout)  # get_nowait comes here too
        if self.mark is not None:
            m = self.mark()
            if m is not None:
                self.ledger.note(m, item)
        if self._room_wanted:
            self._room_wanted = False
            cb = self.on_room
            if cb is not None:
                self.room_signals += 1
                cb()
        return item

    def want_room(self) -> None:
        """Arms ``on_room`` for the next take. Arm before the last look for room, so a take
        between the look and the wait still wakes the waiter."""
        self._room_wanted = True

    def wait_empty(self, timeout: float) -> bool:
        """Waits until the gateway took everything (or ``timeout``); True when empty."""
        end = time.monotonic() + timeout
        with self.not_full:
            while self.queue:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.not_full.wait(left)
            return True

    def take_all(self) -> list[list[bytes]]:
        """Empties the queue (what could not be sent at shutdown), for counting; not a take
        by the gateway, so neither the ledger nor ``on_room`` hears of it."""
        with self.not_full:
            out = list(self.queue)
            self.queue.clear()
            self._sizes.clear()
            self.depth_bytes = 0
            self.unfinished_tasks = 0
            self.not_full.notify_all()
            return out


def tuples_in_frame(frame: bytes) -> int:
    """Tuples a frame carries: a TUPLE_BATCH's count; acks and markers carry none."""
    return batch_count(frame) if frame_type(frame) == MsgType.TUPLE_BATCH else 0


def tuples_in(flushes: Iterable[list[bytes]]) -> tuple[int, int]:
    """(tuples in TUPLE_BATCH frames, frames) of some flushes: what a drop loses."""
    tuples = frames = 0
    for flush in flushes:
        for f in flush:
            frames += 1
            tuples += tuples_in_frame(f)
    return tuples, frames


class Outbox:
    """The execution thread's end of the outbound queue.

    A bolt's flush waits for room (that is how backpressure reaches a bolt); a spout never
    blocks inside ``emit``: what does not fit is held here, and the spout loop stops calling
    ``next_tuple`` until it has gone out (``push_held``).

    At shutdown (``begin_drain``) a send still waits for room, but only until the drain's
    deadline; a flush that misses it is dropped and counted (``dropped_tuples``), never lost
    silently."""

    def __init__(self, out: OutQueue, out_bytes: QueueBytes, wake: Callable[[], None], *,
                 clock: Callable[[], float] = time.monotonic, hold: bool = False) -> None:
        self._out = out
        self.bytes = out_bytes
        self._wake = wake
        self._clock = clock
        self.hold = hold  # a spout's outbox holds; set once the component is known
        self.held: list[list[bytes]] = []
        self.time_blocked_s = 0.0
        self.deadline: float | None = None  # set by begin_drain: sends give up after it
        self.dropped_tuples = 0  # in all: __dropped-tuples/shutdown
        self.dropped_frames = 0
        self.unwritten_tuples = 0  # of them, handed to the connection but not written

    @property
    def queue(self) -> OutQueue:
        return self._out

    def qsize(self) -> int:
        return self._out.qsize()

    def begin_drain(self, seconds: float) -> None:
        """Shutdown: from now on a send waits at most until ``seconds`` from now."""
        if self.deadline is None:
            self.deadline = self._clock() + seconds

    def _left(self) -> float:
        d = self.deadline
        return float("inf") if d is None else d - self._clock()

    def try_put(self, frames: list[bytes], size: int, timeout: float = 0.0) -> bool:
        if not self._out.offer(frames, size, timeout):
            return False
        self.bytes.put += size
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
        """Waits for room (the gateway is behind or the stream manager stopped reading us):
        asleep on the queue's condition, which the gateway's take notifies."""
        size = sum(len(f) for f in frames)
        if not self.try_put(frames, size):
            t0 = self._clock()
            self._wake()  # the gateway may not know there is something to take
            while True:
                left = self._left()
                if left <= 0:
                    self._drop([frames])
                    break
                if self.try_put(frames, size, min(left, SAFETY_WAIT_S)):
                    break
                self._wake()
            self.time_blocked_s += self._clock() - t0
        self._wake()

    def drain(self, *, link_up: Callable[[], bool] = lambda: True) -> bool:
        """Shutdown, after the component's last flush: moves held frames out and waits until
        the gateway took everything and its connection wrote it, up to the deadline or until
        the link is down (``link_up`` false: nothing more can go). What is left then (held,
        queued, or in the connection's unwritten bytes: ``queue.mark``) is dropped and
        counted. True when everything went.

        The queue's waits wake on the gateway's takes; the connection's buffer and ``link_up``
        have no condition to wait on, so they are looked at every SAFETY_WAIT_S (and every
        10 ms for the last bytes in the connection's buffer)."""
        out = self._out
        while self.held and self._left() > 0 and link_up():
            frames = self.held[0]
            if self.try_put(frames, sum(map(len, frames)), min(self._left(), SAFETY_WAIT_S)):
                self.held.pop(0)
            self._wake()
        while not self.held and self._left() > 0 and link_up():
            if out.wait_empty(min(self._left(), SAFETY_WAIT_S)):
                break
            self._wake()
        while not self.held and not out.qsize() and self._left() > 0 and link_up() and self._unsent():
            time.sleep(min(0.01, max(0.0, self._left())))
        lost = self.held + out.take_all()
        self.held = []
        self._drop(lost)
        cut_tuples, cut_frames = out.ledger.unwritten(out.mark() if out.mark is not None else None)
        self.unwritten_tuples += cut_tuples
        self.dropped_tuples += cut_tuples
        self.dropped_frames += cut_frames
        return not (lost or cut_frames)

    def _unsent(self) -> bool:
        mark = self._out.mark
        m = mark() if mark is not None else None
        return m is not None and m[2] > 0

    def _drop(self, flushes: list[list[bytes]]) -> None:
        tuples, frames = tuples_in(flushes)
        self.dropped_tuples += tuples
        self.dropped_frames += frames


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

    def restore(self, item: InItem) -> int:
        """A restore (effectively once): every tuple batch and checkpoint marker ahead of it is
        the old run's, which the restore rolls back (the stream manager fences the rest), so
        they are dropped here instead of processed first: a slow bolt's backlog does not hold up
        its restore. Every other item (a plan, a command) keeps its place. Returns the number
        of items dropped; ``item`` is then delivered as any other."""
        old_run = (InKind.BATCH, InKind.MARKER)
        kept = collections.deque(i for i in self.overflow if i[0] not in old_run)
        dropped = len(self.overflow) - len(kept)
        self.overflow = kept
        with self._in.mutex:  # the execution thread takes under the same lock
            waiting = self._in.queue
            items = list(waiting)
            waiting.clear()
            for i in items:
                if i[0] not in old_run:
                    waiting.append(i)
                    continue
                dropped += 1
                if i[0] is InKind.BATCH:
                    self.bytes.put -= len(i[1])  # never taken: the producer's count takes it back
            self._in.not_full.notify_all()
        self.deliver(item)
        return dropped

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
