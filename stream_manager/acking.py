"""The stream manager's side of XOR acking: ``AckService`` turns ACK_BATCH frames into updates
of the shared tracker (``heron_py.acking.tracker.XorTracker``, Storm's acker algorithm, which the
test harness runs too) and resolved roots into one ACK_RESULT frame per spout task, and rotates
the tracker's buckets on a timer. It does no I/O: frames leave through the ``send`` callback it
is given (which sends them, or holds them while the spout is not connected).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from heron_py.acking.tracker import Resolved, XorTracker, result_frame, result_frames
from heron_py.common.framing import BODY_OFFSET, batch_dest


class AckService:
    # 3 buckets rotated every T/2: a root times out between T and 1.5 T after it was seen
    BUCKETS = 3

    def __init__(self, send: Callable[[int, bytes], None], log: logging.Logger) -> None:
        self.tracker = XorTracker(buckets=self.BUCKETS)
        self._send = send
        self._log = log

    @property
    def pending(self) -> int:
        return self.tracker.pending

    def on_ack_batch(self, frame: bytes) -> None:
        """Records for one of our spout tasks: update the XOR state, report resolved roots (the
        result records written by the tracker straight into the frame's body)."""
        spout = batch_dest(frame)
        results = bytearray()
        try:
            unknown = self.tracker.apply_body(spout, memoryview(frame)[BODY_OFFSET:], results)
        except ValueError as e:  # not whole records: refused whole, the stream manager goes on
            self._log.warning("ACK_BATCH for task %d dropped: %s", spout, e)
            return
        for kind in unknown:
            self._log.warning("ack record of unknown kind %d for task %d; ignored", kind, spout)
        if results:
            self._send(spout, result_frame(spout, results))

    def rotate(self) -> None:
        """Times out the oldest bucket's roots."""
        self._send_results(self.tracker.rotate())

    async def run_rotation(self, timeout_s: Callable[[], float],
                           sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        """Rotates every ``timeout/(buckets-1)`` seconds; the timeout is read each time, so a
        new physical plan's value applies from the next rotation."""
        while True:
            await sleep(timeout_s() / (self.BUCKETS - 1))
            self.rotate()

    def _send_results(self, resolved: list[Resolved]) -> None:
        for task, frame in result_frames(resolved).items():
            self._send(task, frame)
