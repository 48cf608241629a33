"""``InProcessWire``: the frames of a topology run in one process, routed as the daemons route them.

The in-process runners put no stream manager between the tasks, so this stands in for the
stream managers' routing and the master link in one place:

- tuple batches and checkpoint markers stay raw and go to the inbox of the task their 12-byte
  header names (``batch_dest``), as a stream manager forwards them without unpickling;
- ACK_BATCH frames go to ``on_acks`` (the XOR tracker a stream manager keeps), or are dropped
  when nothing tracks acks (at most once);
- any other frame is a task's report to the master: decoded through the message registry the
  daemons use (``heron_py.common.wire``), so a frame no daemon would accept is refused here too,
  and handed to the ``on_report`` given to ``route``; another raw frame, or any report when no
  master listens, is dropped.

``send`` only queues: a runner that must not re-enter its master while a task is mid-call routes
between calls (``route``); one that may routes at once. The master is named at each ``route``, not
at construction, because the master commands the tasks whose sink this is.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable

from google.protobuf.message import Message

from heron_py.common.framing import MsgType, batch_dest, frame_type
from heron_py.common.wire import decode

_TO_A_TASK = (MsgType.TUPLE_BATCH, MsgType.CKPT_MARKER)


class InProcessWire:
    """The frames the tasks sent, and one inbox per task for those routed to it."""

    def __init__(self, task_ids: Iterable[int], *, on_acks: Callable[[bytes], None] | None = None,
                 peer: str = "an in-process task") -> None:
        self.inboxes: dict[int, collections.deque[bytes]] = {t: collections.deque() for t in task_ids}
        self._sent: collections.deque[bytes] = collections.deque()
        self._on_acks = on_acks
        self._peer = peer  # named in a decoding error, as a daemon names the connection

    def send(self, frames: list[bytes]) -> None:
        """The tasks' sink: queues ``frames`` for the next ``route``."""
        self._sent.extend(frames)

    def route(self, on_report: Callable[[Message], None] | None = None) -> bool:
        """Every queued frame to its place, including frames queued meanwhile by the handlers;
        True if there were any."""
        moved = bool(self._sent)
        while self._sent:
            frame = self._sent.popleft()
            kind = frame_type(frame)
            if kind in _TO_A_TASK:
                self.inboxes[batch_dest(frame)].append(frame)
            elif kind == MsgType.ACK_BATCH:
                if self._on_acks is not None:
                    self._on_acks(frame)
            elif on_report is not None:
                msg = decode(kind, frame, self._peer)
                if isinstance(msg, Message):
                    on_report(msg)
        return moved

    def clear(self) -> None:
        """Drops every frame not yet processed: a restore discards the old run's in-flight data."""
        self._sent.clear()
        for box in self.inboxes.values():
            box.clear()
