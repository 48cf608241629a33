"""Who is the topology master: the claim on the location node, a standby's wait, and the
state writer thread.

Every call into the state manager runs on one worker thread (``StateWorker``): a ZooKeeper
call can block for as long as an outage lasts, and the master's event loop must keep
serving its stream managers meanwhile. Kazoo's callbacks (session changes, the location
watch) arrive on kazoo's thread and only schedule work on the loop.

Roles and transitions (``next_role`` is the whole rule; the class only does I/O):

    CANDIDATE --claimed--> ACTIVE          CANDIDATE --held by other--> STANDBY
    STANDBY --node vanished--> CANDIDATE   ACTIVE --session back, node ours or free--> ACTIVE
    ACTIVE --session back, node held by another--> STOPPED (exit; the executor restarts us
    as a standby). Heron's issue 1869: a master whose session expired never re-created its
    node; here every reconnect re-checks the claim.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from heron_py.state import StateManager, TManagerLocation


class Role(str, enum.Enum):
    CANDIDATE = "candidate"
    STANDBY = "standby"
    ACTIVE = "active"
    STOPPED = "stopped"


def next_role(role: Role, claimed: bool) -> Role:
    """The role after a claim attempt: ``claimed`` is True when this process holds the node."""
    if role is Role.STOPPED:
        return Role.STOPPED
    if claimed:
        return Role.ACTIVE
    # someone else holds it: a candidate or standby waits; an active master has lost its claim
    return Role.STOPPED if role is Role.ACTIVE else Role.STANDBY


class ClaimGate:
    """One claim in flight at a time, and no request lost: a request while a claim is in flight
    (a "node vanished" event, a session back) is remembered and makes one more claim after it,
    since the claim in flight may have read the node before the event changed it."""

    def __init__(self) -> None:
        self.in_flight = False
        self.again = False

    def request(self) -> bool:
        """True: start a claim now; False: one is in flight and will be followed by another."""
        if self.in_flight:
            self.again = True
            return False
        self.in_flight = True
        return True

    def done(self) -> bool:
        """The claim in flight finished; True: a request came meanwhile, claim again."""
        self.in_flight = False
        again, self.again = self.again, False
        return again


class StateWorker:
    """One thread for all state calls, in submission order. ``put_latest`` coalesces: while a
    write of the same key is queued, only the newest document is written."""

    def __init__(self, log: logging.Logger) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="state")
        self._latest: dict[str, Callable[[], None]] = {}
        self._lock = threading.Lock()
        self._log = log
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        return self._pool.submit(self._guard, fn, *args)

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except Exception:
            self._log.exception("state call %s failed", getattr(fn, "__name__", fn))
            raise

    def put_latest(self, key: str, write: Callable[[], None]) -> None:
        if self._closed:
            return
        with self._lock:
            queued = key in self._latest
            self._latest[key] = write
        if not queued:
            self._pool.submit(self._flush, key)

    def _flush(self, key: str) -> None:
        with self._lock:
            write = self._latest.pop(key, None)
        if write is not None:
            try:
                write()
            except Exception:
                self._log.exception("state write %s failed", key)

    def close(self, wait: bool = True) -> None:
        self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


class Election:
    def __init__(self, *, state: StateManager, worker: StateWorker, topology: str,
                 location: Callable[[], TManagerLocation], loop: asyncio.AbstractEventLoop,
                 on_role: Callable[[Role, TManagerLocation | None], None], log: logging.Logger) -> None:
        self.role = Role.CANDIDATE
        self.holder: TManagerLocation | None = None
        self._state = state
        self._worker = worker
        self._topology = topology
        self._location = location
        self._loop = loop
        self._on_role = on_role
        self._log = log
        self._unwatch: Callable[[], None] | None = None
        self._gate = ClaimGate()

    def start(self) -> None:
        self._state.add_session_listener(self._on_session)
        self._unwatch = self._state.watch_tmanager_location(self._topology, self._on_location)
        self.attempt()

    def stop(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
        if self.role is Role.ACTIVE:
            self._worker.submit(self._state.release_tmanager, self._topology)
        self.role = Role.STOPPED

    def attempt(self) -> None:
        if self.role is Role.STOPPED or not self._gate.request():
            return
        fut = self._worker.submit(self._state.acquire_tmanager, self._topology, self._location())
        fut.add_done_callback(lambda f: self._loop.call_soon_threadsafe(self._claimed, f))

    def _claimed(self, fut: Future[TManagerLocation | None]) -> None:
        again = self._gate.done()
        if fut.exception() is not None:
            # the store is unreachable: try again shortly, in whatever role we have now
            self._loop.call_later(1.0, self.attempt)
            return
        holder = fut.result()
        before = self.role
        self.role = next_role(self.role, holder is None)
        self.holder = holder
        if self.role is not before:
            self._on_role(self.role, holder)
        if again:
            self.attempt()

    # kazoo / watcher threads: schedule only
    def _on_session(self, state: str) -> None:
        if state == "connected":
            self._loop.call_soon_threadsafe(self.attempt)

    def _on_location(self, loc: TManagerLocation | None) -> None:
        if loc is None:
            self._loop.call_soon_threadsafe(self._vanished)

    def _vanished(self) -> None:
        if self.role is not Role.STOPPED:
            # standby: the master is gone, claim it; active: our node went with an expired
            # session, claim it back before anybody else does; candidate: our first claim may
            # have read the node just before it went (attempt claims again after it)
            self.attempt()


class Standing:
    """Whether this master speaks for the topology, for the parts that ask (the stream managers'
    links, the relauncher, the checkpoint driver, and the daemon's ``active``): claimed in the
    ``election`` *and* the stored plan read (``took_over``). A master that took over must not
    push a plan before it knows the version to continue from, or stream managers that already
    hold that version would ignore the new plan. And whether the state manager's session is up
    (``on_session``, its listener; localfs has none to lose)."""

    def __init__(self, election: Election) -> None:
        self._election = election
        self.since: float | None = None  # when the stored plan was read, once claimed
        self._session_up = True

    def is_active(self) -> bool:
        return self._election.role is Role.ACTIVE and self.since is not None

    def session_ok(self) -> bool:
        """Active with its session up: the checkpoint driver completes checkpoints only then."""
        return self.is_active() and self._session_up

    def took_over(self, at: float) -> None:
        """The stored plan is read (and the master's epoch taken) after the claim, at ``at``."""
        self.since = at

    def on_session(self, state: str) -> None:
        """The state manager's session listener (its thread): "connected" or not."""
        self._session_up = state == "connected"
