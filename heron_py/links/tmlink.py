"""Following the topology master's location from a daemon's event loop.

The state manager's watch calls back on its own thread; this keeps the latest location on
the loop and an event that is set on every change, so a daemon's connect loop waits for a
change instead of polling the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from heron_py.common.handshake import PeerIdentity
from heron_py.common.net import DEFAULT_LIVENESS, Connection, FrameHandler, Liveness, connect
from heron_py.common.reconnect import Unreachable
from heron_py.common.tls import PeerTls, tls_client_args
from heron_py.state import StateManager, TManagerLocation


class LocationFollower:
    def __init__(self, state: StateManager, topology: str) -> None:
        self._state = state
        self._topology = topology
        self.current: TManagerLocation | None = None
        self.changed = asyncio.Event()
        self._unwatch: Callable[[], None] | None = None

    async def start(self) -> None:
        loop = asyncio.get_running_loop()

        def on_location(loc: TManagerLocation | None) -> None:  # the watch's thread
            loop.call_soon_threadsafe(self._apply, loc)

        self._unwatch = await loop.run_in_executor(None, self._state.watch_tmanager_location, self._topology,
                                                   on_location)

    def _apply(self, loc: TManagerLocation | None) -> None:
        self.current = loc
        self.changed.set()

    async def wait_change(self, timeout: float | None = None) -> None:
        """Returns on the next change (or after ``timeout``); clears the event first."""
        self.changed.clear()
        try:
            await asyncio.wait_for(self.changed.wait(), timeout)
        except TimeoutError:
            pass

    def moved_from(self, loc: TManagerLocation) -> bool:
        cur = self.current
        return cur is not None and (cur.host, cur.port) != (loc.host, loc.port)

    def stop(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None


# the active master proves its role; it has no id (any container may run it)
MASTER = PeerIdentity("tmanager", "")


async def connect_master(follow: LocationFollower, handler: FrameHandler, secret: bytes, *, role: str, peer_id: str,
                         log: logging.Logger, max_frame: int,
                         tls: PeerTls | None,
                         liveness: Liveness = DEFAULT_LIVENESS) -> tuple[Connection, TManagerLocation]:
    """A connection to the active topology master: waits for a location, then connects (with
    TLS when the topology has it). A master that does not answer is ``Unreachable``: its node
    stays until its session expires, so the caller waits for a change or retries."""
    while (loc := follow.current) is None:
        await follow.wait_change()
    try:
        conn = await connect(loc.host, loc.port, handler, secret, role=role, peer_id=peer_id, log=log,
                             max_frame=max_frame, liveness=liveness, expect=MASTER, **tls_client_args(tls))
    except OSError as e:
        raise Unreachable(f"topology master at {loc.host}:{loc.port} not reachable ({e}); "
                          f"waiting for a new location") from e
    return conn, loc
