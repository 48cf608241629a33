"""What a connection holds back from its transport: frames sent but not yet handed over.

A transport's buffer is out of reach once written: nothing in it can be taken back. A stream
manager's connection to an effectively-once instance keeps at most ``cap`` bytes there and the
rest here, untagged (a frame's tag is made as it is handed over, so the tags' sequence has no
gap), where a restore can still drop what belongs to the run it rolls back. Without this, a
restore of a slow task waited behind up to the high watermark of the old run's batches (16 MB:
seconds of a slow bolt's input) that it then rolled back anyway.

``HeldOutput`` is pure: what is held and how much goes next. ``HeldWriter`` moves it to the
transport and keeps the watermarks; the connection (heron_py/common/net.py) owns one once
``hold_output`` is called.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from typing import Protocol


class HeldOutput:
    __slots__ = ("cap", "frames", "nbytes")

    def __init__(self, cap: int) -> None:
        if cap <= 0:
            raise ValueError(f"held output: the transport's share must be positive, found {cap} bytes")
        self.cap = cap
        self.frames: collections.deque[bytes] = collections.deque()
        self.nbytes = 0

    def __bool__(self) -> bool:
        return bool(self.frames)

    def add(self, frame: bytes) -> None:
        self.frames.append(frame)
        self.nbytes += len(frame)

    def add_many(self, frames: Iterable[bytes]) -> None:
        for frame in frames:
            self.frames.append(frame)
            self.nbytes += len(frame)

    def take(self, buffered: int) -> list[bytes]:
        """The frames to hand over to a transport that holds ``buffered`` bytes: from the oldest,
        until they pass what is left of ``cap``, the last one crossing it. Crossing it is the
        point: the transport then pauses us and resumes us once it drained, which is when the
        connection hands over more. Nothing when the transport is already above the cap."""
        room = self.cap - buffered
        out: list[bytes] = []
        frames = self.frames
        while frames and room >= 0:
            frame = frames.popleft()
            size = len(frame)
            self.nbytes -= size
            room -= size
            out.append(frame)
        return out

    def drop(self, is_dropped: Callable[[bytes], bool]) -> list[bytes]:
        """Removes the frames ``is_dropped`` picks, in order, and returns them; the rest keep
        their order."""
        self.frames, dropped = partition(self.frames, is_dropped)
        self.nbytes = sum(len(f) for f in self.frames)
        return dropped

    def take_all(self) -> list[bytes]:
        """Everything, oldest first (a connection closing writes what was sent before)."""
        out = list(self.frames)
        self.frames.clear()
        self.nbytes = 0
        return out


def partition(frames: Iterable[bytes], is_picked: Callable[[bytes], bool]) -> tuple[collections.deque[bytes],
                                                                                   list[bytes]]:
    """``frames`` without those ``is_picked`` picks, and those, each in their order."""
    kept: collections.deque[bytes] = collections.deque()
    picked: list[bytes] = []
    for frame in frames:
        (picked if is_picked(frame) else kept).append(frame)
    return kept, picked


class Transport(Protocol):
    """What the writer needs of an asyncio (or uvloop) transport."""

    def get_write_buffer_size(self) -> int: ...
    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None: ...
    def writelines(self, data: Iterable[bytes | bytearray | memoryview]) -> None: ...
    def is_closing(self) -> bool: ...


class HeldWriter:
    """A connection's held output at work: frames wait in ``held`` and go to the transport,
    tagged as they go (``tag``, the connection's next frame tag), while it is under its share;
    the transport pauses the connection past the share and resumes it at half, when ``write``
    hands over more. The watermarks count the transport's buffer and the hold together, and
    ``on_marks(paused)`` says when they are crossed (the connection's backpressure signal)."""

    def __init__(self, cap: int, transport: Transport, tag: Callable[[bytes], bytes],
                 on_marks: Callable[[bool], None], call_soon: Callable[[Callable[[], None]], object],
                 paused: bool = False) -> None:
        self.held = HeldOutput(cap)
        self._asked = cap  # the share is this or the low watermark, the smaller
        self._tr = transport
        self._tag = tag
        self._on_marks = on_marks
        self._call_soon = call_soon
        self._marks = (0, 0)  # high, low
        # above the high watermark until below the low one; a connection paused already when its
        # hold starts stays so until the hold resumes it (the transport, held to its share from
        # then on, never would)
        self.paused = paused
        self._due = False  # a write is scheduled for this turn

    def add(self, frame: bytes) -> None:
        self.held.add(frame)
        self._soon()

    def add_many(self, frames: Iterable[bytes]) -> None:
        self.held.add_many(frames)
        self._soon()

    def _soon(self) -> None:
        if not self._due:
            self._due = True
            self._call_soon(self.write)

    def set_limits(self, high: int, low: int) -> None:
        """The watermarks; the transport's share is at most ``low``, so that an empty hold is
        below it."""
        self._marks = (high, low)
        held = self.held
        held.cap = max(1, min(self._asked, low) if low else self._asked)
        self._tr.set_write_buffer_limits(high=held.cap, low=held.cap // 2)
        self.check()

    def write(self) -> None:
        """Hands held frames over until the transport is past its share or none is left."""
        self._due = False
        tr, held, tag = self._tr, self.held, self._tag
        if tr.is_closing():
            return
        while held:
            out: list[bytes] = []
            for frame in held.take(tr.get_write_buffer_size()):
                out.append(frame)
                out.append(tag(frame))
            if not out:
                # past its share, so the transport paused the connection (asyncio and uvloop
                # pause a protocol whenever its buffer passes the high limit,
                # set_write_buffer_limits included); the resume, at half the share, comes back
                break
            tr.writelines(out)
        self.check()

    def check(self) -> None:
        high, low = self._marks
        size = self._tr.get_write_buffer_size() + self.held.nbytes
        if not self.paused and high and size > high:
            self.paused = True
            self._on_marks(True)
        elif self.paused and size <= low:
            self.paused = False
            self._on_marks(False)

    def drop(self, is_dropped: Callable[[bytes], bool]) -> list[bytes]:
        dropped = self.held.drop(is_dropped)
        if dropped:
            self.check()
        return dropped

    def flush_all(self) -> None:
        """Everything held, to the transport now (a connection closing writes what was sent)."""
        tag = self._tag
        self._tr.writelines([x for f in self.held.take_all() for x in (f, tag(f))])
