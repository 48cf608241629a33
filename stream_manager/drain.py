"""The stream manager's side of a live rescale's drain point (topology_master/rescale.py): the
master deactivated the spouts and asks every stream manager to say when its own spouts' tuple
trees in flight are complete. Answered once the ack tracker held no open tree for ``quiet_ms``
without a break: a spout's last batch, emitted just before its deactivation reached it, opens
trees after a first empty moment, and the quiet time lets it come. At most once nothing is
tracked, so the answer comes after the quiet time alone. A newer request ends an older wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Protocol

from heron_py.common.net import Connection, Route, on
from heron_py.common.wire import encode_msg
from proto import heron_py_pb2 as pb

POLL_S = 0.005


class OpenTrees(Protocol):
    @property
    def pending(self) -> int: ...


class Drainer:
    def __init__(self, container: int, trees: OpenTrees, to_master: Callable[[bytes], None],
                 spawn: Callable[[Coroutine[Any, Any, None]], None], *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        self._container = container
        self._trees = trees
        self._to_master = to_master
        self._spawn = spawn
        self._clock = clock
        self._sleep = sleep
        self.latest = 0  # the newest request's id: an older wait ends

    def routes(self) -> list[Route]:
        return [on("tmanager", pb.DrainRequest, self.on_request)]

    def on_request(self, conn: Connection, msg: pb.DrainRequest) -> None:
        self.latest = msg.drain_id
        self._spawn(self.wait(msg.drain_id, max(0, msg.quiet_ms) / 1000.0))

    async def wait(self, drain_id: int, quiet_s: float) -> None:
        quiet_since: float | None = None
        while drain_id == self.latest:
            now = self._clock()
            if self._trees.pending:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = now
            if quiet_since is not None and now - quiet_since >= quiet_s:
                self._to_master(encode_msg(pb.Drained(container=self._container, drain_id=drain_id, pending=0)))
                return
            await self._sleep(POLL_S)
