"""A task's side of a checkpoint: marker alignment for a bolt, the save-and-emit step for a spout.

Chandy-Lamport over FIFO channels: a checkpoint's marker splits each input channel into "before"
(part of the snapshot) and "after". A bolt with several input channels (one per upstream task,
from the physical plan) sees the marker for checkpoint C arrive on each at a different time, so
it holds the input that follows the marker on a channel until the marker arrived on every
channel; then its state reflects exactly the "before" input of all channels: it saves, forwards
the marker downstream and only then processes the held input. Heron does this in the stream
manager's checkpoint gateway (heron/stmgr/src/cpp/manager/checkpoint-gateway.cpp).

The objects here do no I/O: each event returns the list of actions the caller carries out in
order (:class:`Deliver` a batch to the component, :class:`Save` its state, :class:`Forward` the
marker on every outgoing stream). :class:`Abort` and :class:`Ignored` say what was dropped and
why, for logs and metrics; they need no other action.

Checkpoint ids are ints that the master makes strictly increasing (see ``coordinator``), so
"newer" is plain ``>``; Heron compares id strings, which breaks when the digits grow.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Generic, TypeAlias, TypeVar

B = TypeVar("B")

# Heron's heron.stmgr.stateful.buffer.size.mb default
DEFAULT_MAX_HELD_BYTES = 100 * 1024 * 1024


class AlignState(Enum):
    IDLE = "idle"  # no checkpoint under way: input goes straight to the component
    ALIGNING = "aligning"  # a marker arrived on some channels: their later input is held


@dataclass(frozen=True)
class Deliver(Generic[B]):
    """Give ``batch`` (from input ``channel``) to the component now."""

    channel: int
    batch: B


@dataclass(frozen=True)
class Save:
    """Save the component's state as checkpoint ``checkpoint_id`` (and report it to the master)."""

    checkpoint_id: int


@dataclass(frozen=True)
class Forward:
    """Send the marker for ``checkpoint_id`` on every outgoing stream, after the Save."""

    checkpoint_id: int


@dataclass(frozen=True)
class Abort:
    """This task gave up on ``checkpoint_id``; it will not save it (the master times it out)."""

    checkpoint_id: int
    reason: str


@dataclass(frozen=True)
class Ignored:
    """A marker that needs nothing: a duplicate, or one for an old or abandoned checkpoint.

    ``channel`` is None for a spout's start request, which comes from the master.
    """

    channel: int | None
    checkpoint_id: int
    reason: str


AlignAction: TypeAlias = Deliver[B] | Save | Forward | Abort | Ignored
SpoutAction: TypeAlias = Save | Forward | Ignored


@dataclass(frozen=True)
class AlignmentConfig:
    max_held_bytes: int = DEFAULT_MAX_HELD_BYTES

    def __post_init__(self) -> None:
        if self.max_held_bytes <= 0:
            raise ValueError(f"max_held_bytes must be > 0, found {self.max_held_bytes}")


class AlignmentBufferFull(Exception):
    """Holding one more batch would pass the bound. Nothing changed: the batch was not taken.

    The caller either calls :meth:`MarkerAligner.abort` (releases the held input, this task
    skips the checkpoint) and offers the batch again, or stops reading until the markers come.
    """

    def __init__(self, task_id: int, checkpoint_id: int, channel: int, nbytes: int, held_bytes: int,
                 limit: int, waiting_for: Iterable[int]) -> None:
        self.task_id, self.checkpoint_id, self.channel = task_id, checkpoint_id, channel
        self.nbytes, self.held_bytes, self.limit = nbytes, held_bytes, limit
        self.waiting_for = sorted(waiting_for)
        super().__init__(
            f"task {task_id}: checkpoint {checkpoint_id} alignment buffer full: a batch of {nbytes} bytes "
            f"from channel {channel} would hold {held_bytes + nbytes} bytes, limit {limit} bytes; "
            f"still waiting for the marker from channels {self.waiting_for}")


class UnknownChannelError(ValueError):
    pass


class MarkerAligner(Generic[B]):
    """One bolt task's marker alignment over its input channels (source task ids)."""

    def __init__(self, task_id: int, channels: Iterable[int], config: AlignmentConfig | None = None) -> None:
        self.task_id = task_id
        self.config = config or AlignmentConfig()
        self._channels = frozenset(channels)
        if not self._channels:
            raise ValueError(f"task {task_id}: a bolt needs at least one input channel, found none")
        self._checkpoint: int | None = None  # the one being aligned
        self._newest: int | None = None  # newest checkpoint this task started, completed or aborted
        self._blocked: set[int] = set()  # channels whose marker for _checkpoint arrived
        self._held: deque[tuple[int, B, int]] = deque()  # (channel, batch, nbytes) in arrival order
        self._held_bytes = 0

    @property
    def state(self) -> AlignState:
        return AlignState.IDLE if self._checkpoint is None else AlignState.ALIGNING

    @property
    def checkpoint_id(self) -> int | None:
        return self._checkpoint

    @property
    def held_bytes(self) -> int:
        return self._held_bytes

    @property
    def held_batches(self) -> int:
        return len(self._held)

    @property
    def channels(self) -> frozenset[int]:
        return self._channels

    @property
    def waiting_for(self) -> frozenset[int]:
        """Channels whose marker for the checkpoint being aligned has not arrived."""
        return frozenset() if self._checkpoint is None else self._channels - self._blocked

    def on_tuples(self, channel: int, batch: B, nbytes: int) -> list[AlignAction[B]]:
        self._check_channel(channel, "tuples")
        if nbytes < 0:
            raise ValueError(f"task {self.task_id}: nbytes must be >= 0, found {nbytes} (channel {channel})")
        if channel not in self._blocked:
            return [Deliver(channel, batch)]
        assert self._checkpoint is not None
        if self._held_bytes + nbytes > self.config.max_held_bytes:
            raise AlignmentBufferFull(self.task_id, self._checkpoint, channel, nbytes, self._held_bytes,
                                      self.config.max_held_bytes, self.waiting_for)
        self._held.append((channel, batch, nbytes))
        self._held_bytes += nbytes
        return []

    def on_marker(self, channel: int, checkpoint_id: int) -> list[AlignAction[B]]:
        self._check_channel(channel, "a marker")
        out: list[AlignAction[B]] = []
        if self._checkpoint is not None and checkpoint_id == self._checkpoint:
            if channel in self._blocked:
                return [Ignored(channel, checkpoint_id, "duplicate marker")]
        elif self._newest is not None and checkpoint_id <= self._newest:
            return [Ignored(channel, checkpoint_id, f"old checkpoint (newest seen {self._newest})")]
        else:
            if self._checkpoint is not None:
                # as Heron: a newer checkpoint supersedes the one under way; everything held came
                # before the newer marker on its channel, so it belongs before the newer snapshot
                out += self.abort(f"superseded by checkpoint {checkpoint_id} (marker on channel {channel})")
            self._checkpoint = self._newest = checkpoint_id
        self._blocked.add(channel)
        if self._blocked >= self._channels:
            out += self._complete()
        return out

    def abort(self, reason: str) -> list[AlignAction[B]]:
        """Give up the checkpoint being aligned: release the held input, in arrival order.

        Later markers for it are ignored as old. No-op when idle.
        """
        if self._checkpoint is None:
            return []
        out: list[AlignAction[B]] = [Abort(self._checkpoint, reason)]
        out += self._release()
        return out

    def remove_channel(self, channel: int) -> list[AlignAction[B]]:
        """The upstream task behind ``channel`` is gone for good: stop waiting for its markers.

        Its held input (if any) stays in order with the rest; this may complete the alignment.
        """
        self._check_channel(channel, "a removal")
        if len(self._channels) == 1:
            raise ValueError(f"task {self.task_id}: cannot remove channel {channel}, the only input channel")
        self._channels = self._channels - {channel}
        self._blocked.discard(channel)
        if self._checkpoint is not None and self._blocked >= self._channels:
            return self._complete()
        return []

    def reset(self, channels: Iterable[int] | None = None) -> int:
        """Restore (rollback) or restart: forget the alignment and drop the held input.

        The input after a restored checkpoint is replayed by the spouts, so held batches must not
        be delivered. Returns how many batches were dropped. ``channels`` replaces the input set
        (a new physical plan). Forgets the newest id too: a restarted master may reuse ids of
        checkpoints that never completed.
        """
        dropped = len(self._held)
        if channels is not None:
            new = frozenset(channels)
            if not new:
                raise ValueError(f"task {self.task_id}: a bolt needs at least one input channel, found none")
            self._channels = new
        self._held.clear()
        self._held_bytes = 0
        self._blocked.clear()
        self._checkpoint = self._newest = None
        return dropped

    def _complete(self) -> list[AlignAction[B]]:
        assert self._checkpoint is not None
        cid = self._checkpoint
        out: list[AlignAction[B]] = [Save(cid), Forward(cid)]
        out += self._release()
        return out

    def _release(self) -> list[AlignAction[B]]:
        out: list[AlignAction[B]] = [Deliver(ch, batch) for ch, batch, _ in self._held]
        self._held.clear()
        self._held_bytes = 0
        self._blocked.clear()
        self._checkpoint = None
        return out

    def _check_channel(self, channel: int, what: str) -> None:
        if channel not in self._channels:
            raise UnknownChannelError(
                f"task {self.task_id}: {what} from channel {channel}, expected one of the input channels "
                f"{sorted(self._channels)}")


class SpoutCheckpoint:
    """A spout's side: on the master's start for checkpoint C, save then emit marker C.

    A spout has no input channels, so there is nothing to align: its snapshot is its state
    between two ``next_tuple`` calls; the caller runs the actions there.
    """

    def __init__(self, task_id: int) -> None:
        self.task_id = task_id
        self._newest: int | None = None

    @property
    def last_checkpoint_id(self) -> int | None:
        return self._newest

    def on_start_checkpoint(self, checkpoint_id: int) -> list[SpoutAction]:
        if self._newest is not None and checkpoint_id <= self._newest:
            reason = "duplicate start" if checkpoint_id == self._newest else f"old checkpoint (newest {self._newest})"
            return [Ignored(None, checkpoint_id, reason)]
        self._newest = checkpoint_id
        return [Save(checkpoint_id), Forward(checkpoint_id)]

    def reset(self) -> None:
        """Restore or restart: a restarted master may reuse ids that never completed."""
        self._newest = None
