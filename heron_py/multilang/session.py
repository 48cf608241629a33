"""The conversation with one multilang subprocess, as a state machine (pure: a clock is
injected, nothing is read or written here).

    STARTING --pid reply--> READY                        (both kinds)
    READY --spout command sent--> WAITING --sync--> READY   (a spout: one command at a time)
    any --fatal error--> DEAD

A bolt stays READY: tuples and heartbeats go out while commands come in. It keeps the
inputs it sent by tuple id until the subprocess acks or fails them (anchors refer to them),
sends a heartbeat every ``heartbeat_s`` and is dead when nothing at all came back for
``timeout_s`` (Storm's ShellBolt: any message counts, a heartbeat's sync being the one a
healthy idle subprocess sends). A spout is dead when a command gets no sync within
``timeout_s`` of the last message (Storm's ShellSpout checks only while it waits).
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Callable
from typing import Any

from heron_py.multilang.errors import ProtocolError


class State(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    WAITING = "waiting"
    DEAD = "dead"


class Session:
    def __init__(self, timeout_s: float, clock: Callable[[], float], heartbeat_s: float = 1.0) -> None:
        self.timeout_s = timeout_s
        self.heartbeat_s = heartbeat_s
        self._clock = clock
        self.state = State.STARTING
        self.pid: int | None = None
        self.last_heard = clock()
        self._next_heartbeat = self.last_heard + heartbeat_s
        self._next_id = 0
        self.inputs: dict[str, Any] = {}  # tuple id -> the input tuple sent with it (a bolt)
        self.waiting_for: str | None = None  # the spout command awaiting its sync
        self._sent = 0  # bolt inputs sent
        self._heartbeats: collections.deque[int] = collections.deque()  # inputs sent before each heartbeat
        self._synced = 0  # inputs sent before the last answered heartbeat

    def _expect(self, *states: State, doing: str) -> None:
        if self.state not in states:
            raise ProtocolError(f"multilang: {doing} in state {self.state.value}; expected state "
                                f"{' or '.join(s.value for s in states)}")

    def started(self, pid: int) -> None:
        self._expect(State.STARTING, doing="a pid reply")
        self.pid = pid
        self.state = State.READY
        self.heard()

    def heard(self) -> None:
        """Any message from the subprocess: it is alive."""
        self.last_heard = self._clock()

    def dead(self) -> None:
        self.state = State.DEAD

    def new_id(self) -> str:
        self._next_id += 1
        return str(self._next_id)

    # a bolt

    def input_sent(self, tup: Any) -> str:
        """Registers an input to send; returns its tuple id."""
        self._expect(State.READY, doing="sending a tuple")
        tuple_id = self.new_id()
        self.inputs[tuple_id] = tup
        self._sent += 1
        return tuple_id

    def take_input(self, tuple_id: Any, command: str) -> Any:
        """The input acked or failed by ``tuple_id``, forgotten here."""
        tup = self.inputs.pop(str(tuple_id), None)
        if tup is None:
            raise ProtocolError(f"multilang: '{command}' of tuple id {tuple_id!r}, which is unknown or already "
                                f"acked/failed; expected the id of a tuple sent and not yet acked or failed")
        return tup

    def anchor(self, tuple_id: str) -> Any:
        tup = self.inputs.get(tuple_id)
        if tup is None:
            raise ProtocolError(f"multilang: an emit anchored on tuple id {tuple_id!r}, which is unknown or "
                                f"already acked/failed; expected the id of a tuple sent and not yet acked or failed")
        return tup

    def heartbeat_due(self, force: bool = False, unwritten: int = 0) -> str | None:
        """A heartbeat's tuple id when one should go out now (every ``heartbeat_s``, or at once
        with ``force`` unless one covering every sent input is already on its way).
        ``unwritten``: inputs still queued for the writer; a heartbeat jumps ahead of them, so
        its answer does not cover them."""
        now = self._clock()
        if force:
            if self._heartbeats and self._heartbeats[-1] == self._sent:
                return None
        elif now < self._next_heartbeat:
            return None
        self._next_heartbeat = now + self.heartbeat_s
        self._heartbeats.append(self._sent - unwritten)
        return self.new_id()

    def synced(self) -> None:
        """A sync: answers the oldest heartbeat (a bolt) or ends the wait (a spout)."""
        if self.state is State.WAITING:
            self.state = State.READY
            self.waiting_for = None
        elif self._heartbeats:
            self._synced = self._heartbeats.popleft()

    @property
    def settled(self) -> bool:
        """Every input sent was read by the subprocess before a heartbeat it answered (a
        sequential adapter has then processed them all)."""
        return self._synced >= self._sent

    def timed_out(self) -> bool:
        """Nothing heard for ``timeout_s`` (a spout's driver asks only while it waits)."""
        if self.state is State.DEAD:
            return False
        return self._clock() - self.last_heard > self.timeout_s

    def remaining_s(self) -> float:
        return max(0.0, self.last_heard + self.timeout_s - self._clock())

    # a spout

    def command_sent(self, command: str) -> None:
        self._expect(State.READY, doing=f"sending '{command}'")
        self.state = State.WAITING
        self.waiting_for = command
        self.heard()  # Storm restarts the clock when it starts waiting
