"""What a connection holds back from its transport: frames sent but not yet handed over.

A transport's buffer is out of reach once written: nothing in it can be taken back. A stream
manager's connection to an effectively-once instance keeps at most ``cap`` bytes there and the
rest here, untagged (a frame's tag is made as it is handed over, so the tags' sequence has no
gap), where a restore can still drop what belongs to the run it rolls back. Without this, a
restore of a slow task waited behind up to the high watermark of the old run's batches (16 MB:
seconds of a slow bolt's input) that it then rolled back anyway.

Pure: the connection (heron_py/common/net.py) does the writing; this decides how much.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable


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
        kept: collections.deque[bytes] = collections.deque()
        dropped: list[bytes] = []
        for frame in self.frames:
            (dropped if is_dropped(frame) else kept).append(frame)
        self.frames = kept
        self.nbytes = sum(len(f) for f in kept)
        return dropped

    def take_all(self) -> list[bytes]:
        """Everything, oldest first (a connection closing writes what was sent before)."""
        out = list(self.frames)
        self.frames.clear()
        self.nbytes = 0
        return out
