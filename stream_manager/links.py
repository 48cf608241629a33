"""The stream manager's link to the active topology master, kept up by
``heron_py.common.reconnect``: found through the state manager's watch on its location;
register, then heartbeat (with metrics) every second; a new location (a standby took over)
closes the connection and the loop connects to the new one. (Its other link, to the
container's metrics manager, is ``heron_py.common.metrics_link``, shared with the instances.)
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Iterable

from heron_py.common.net import DEFAULT_LIVENESS, Connection, Liveness, Route, Routed, Routes, on
from heron_py.common.reconnect import run_link
from heron_py.common.tls import PeerTls
from heron_py.links.tmlink import LocationFollower, connect_master
from heron_py.state import StateManager, TManagerLocation
from proto import heron_py_pb2 as pb

HEARTBEAT_S = 1.0
Sleep = Callable[[float], Awaitable[None]]


def master_routes(on_pplan: Callable[[bytes], None], log: logging.Logger,
                  more: Iterable[Route] = ()) -> Routes:
    """What the master may send on our link to it: the plan, the answer to our registration,
    and ``more`` (effectively once's commands, ``CheckpointRelay.master_routes``)."""

    def registered(conn: Connection, resp: pb.RegisterStmgrResponse) -> None:
        if not resp.ok:
            log.error("topology master refused registration: %s", resp.error)

    return Routes("stmgr's master link", [
        on("tmanager", pb.NewPhysicalPlan, lambda conn, m: on_pplan(m.pplan_json)),
        on("tmanager", pb.RegisterStmgrResponse, registered),
        *more])


class MasterChannel:
    """The registered connection to the master, for those who report to it (the checkpoint
    relay): made before the link, so neither needs the other to exist first."""

    def __init__(self) -> None:
        self.conn: Connection | None = None  # while registered

    def send(self, frame: bytes) -> None:
        """A report for the master (an instance's checkpoint report); dropped while not registered,
        as the master then restores anyway."""
        if self.conn is not None:
            self.conn.send(frame)


class MasterLink:
    def __init__(self, *, topology: str, container: int, host: str, secret: bytes, state: StateManager,
                 log: logging.Logger, max_frame: int, routes: Routes, channel: MasterChannel,
                 instance_infos: Callable[[], list[pb.InstanceInfo]], metrics: Callable[[], pb.StmgrMetrics],
                 unanswered: Callable[[], list[bytes]] = list, sleep: Sleep = asyncio.sleep,
                 tls: PeerTls | None = None, liveness: Liveness = DEFAULT_LIVENESS) -> None:
        """``unanswered``: requests the master has not answered yet (a rollback request), sent
        again after registering and with every heartbeat, so none is lost with a link."""
        self.channel = channel
        self._unanswered = unanswered
        self._liveness = liveness
        self._tls = tls
        self.port = 0  # ours, once we listen (listening_on)
        self._topology = topology
        self._container = container
        self._host = host
        self._secret = secret
        self._state = state
        self._log = log
        self._max_frame = max_frame
        self._handler = Routed(routes)
        self._instance_infos = instance_infos
        self._metrics = metrics
        self._sleep = sleep
        self._follow: LocationFollower | None = None
        self._loc: TManagerLocation | None = None

    def listening_on(self, port: int) -> None:
        """Our port, which the registration tells the master. Known only once the stream manager
        listens, after its parts are made (its server's handler needs them), so it comes here
        rather than to the constructor; before the link runs (``run``)."""
        self.port = port

    async def run(self, stop: asyncio.Event) -> None:
        """Stays registered with the active master until ``stop``; the location comes from a
        watch, so a new master is noticed without polling the store."""
        follow = self._follow = LocationFollower(self._state, self._topology)
        await follow.start()
        try:
            # a dead master's node stays until its session expires: retry now and then, and
            # at once when the location changes
            await run_link("topology master", self._connect, self._session, stop=stop, log=self._log,
                           retry_s=0.5, reconnect_s=0.2, wait=follow.wait_change)
        finally:
            follow.stop()

    async def _connect(self) -> Connection:
        assert self._follow is not None
        conn, self._loc = await connect_master(self._follow, self._handler, self._secret, role="stmgr",
                                               peer_id=str(self._container), log=self._log,
                                               max_frame=self._max_frame, tls=self._tls, liveness=self._liveness)
        return conn

    async def _session(self, conn: Connection) -> None:
        follow, loc = self._follow, self._loc
        assert follow is not None and loc is not None
        self.channel.conn = conn
        try:
            conn.send_msg(pb.RegisterStmgrRequest(
                container=self._container, host=self._host, port=self.port, pid=os.getpid(),
                instances=self._instance_infos()))
            self._log.info("registered with topology master at %s:%d (pid %d)", loc.host, loc.port, loc.pid)
            conn.send_many(self._unanswered())
            while not follow.moved_from(loc):
                await self._sleep(HEARTBEAT_S)
                self.heartbeat(with_metrics=True)
            self._log.info("topology master moved; reconnecting")
            conn.close("topology master moved")
        finally:
            self.channel.conn = None

    def heartbeat(self, *, with_metrics: bool) -> None:
        """Also sent at once when an instance becomes ready, so the master learns it now."""
        conn = self.channel.conn
        if conn is None:
            return
        hb = pb.StmgrHeartbeat(container=self._container, instances=self._instance_infos())
        if with_metrics:
            hb.metrics.CopyFrom(self._metrics())
        conn.send_msg(hb)
        conn.send_many(self._unanswered())

    def close(self, reason: str) -> None:
        if self.channel.conn is not None:
            self.channel.conn.close(reason)

