"""The metrics manager daemon: one per container.

Instances and the stream manager of the container connect to it (authenticated frames, a
connection of their own, apart from the data path) and send a JSON report every
``topology.metrics.export.interval.secs``. It keeps the latest report of each, serves them
in Prometheus text format at ``http://127.0.0.1:<http_port>/metrics`` (prometheus-client),
appends one JSON line per interval to ``logs/container-K/metrics.jsonl`` (the file sink,
rotated by rename past ``heron.logging.maximum.size.mb``, keeping ``heron.logging.maximum.files``),
and forwards the container's reports and exceptions to the active topology master, found
through the state manager. Restart counts come from the executor's ``restarts.json``.

Its ports go to ``container-K/metricsmgr.json`` ({"port", "http_port", "pid"}), where the
container's processes find it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from heron_py.common.config import ConfigError, LinkConfig, LogCaps
from heron_py.common.container_layout import TopologyPaths
from heron_py.common.daemon import DaemonBase, FatalError, setup_logging, write_atomically
from heron_py.common.framing import DEFAULT_MAX_FRAME, MsgType, encode_frame
from heron_py.common.handshake import scrape_token
from heron_py.common.host import is_loopback
from heron_py.common.logrotate import rotate_by_rename
from heron_py.common.net import (
    DEFAULT_LIVENESS,
    BaseHandler,
    Connection,
    Counters,
    Routed,
    Routes,
    serve,
)
from heron_py.common.reconnect import run_link
from heron_py.common.tls import PeerTls
from heron_py.links.tmlink import LocationFollower, connect_master
from heron_py.state import StateManager, StateManagerError, TManagerLocation
from heron_py.state import config as statecfg
from heron_py.state.stores import run_with_state
from metrics_manager.http import MetricsHttp, serve_metrics
from metrics_manager.store import ReportError, parse_report
from metrics_manager.wiring import build

INTERVAL_KEY = "topology.metrics.export.interval.secs"
DEFAULT_INTERVAL_S = 10.0
# a report that brings counters the master has not had (a task's first report once it runs)
# goes to the master this soon, not at the next interval: the reports of a container's tasks,
# which come in together at its start, go in one forward
FORWARD_SOON_S = 0.2


def export_interval(config: dict[str, Any]) -> float:
    """The report interval; 0 turns metrics export off. A bad value is one clear error."""
    raw = config.get(INTERVAL_KEY, DEFAULT_INTERVAL_S)
    try:
        v = float(raw)
    except (TypeError, ValueError):
        v = -1.0
    if v < 0:
        raise FatalError(f"config {INTERVAL_KEY}: expected a number of seconds >= 0 (0 turns metrics off), "
                         f"found {raw!r}")
    return v


class MetricsManager(DaemonBase):
    def __init__(self, *, topology: str, container: int, secret: bytes, state: StateManager,
                 paths: TopologyPaths, log: logging.Logger, host: str = "127.0.0.1",
                 max_frame: int = DEFAULT_MAX_FRAME, tls: PeerTls | None = None, http_host: str = "127.0.0.1") -> None:
        self.topology = topology
        # reports come from this container's processes only (loopback); the Prometheus
        # endpoint binds the container's address, with the topology's token off loopback
        self.http_host = http_host
        self._tls = tls  # for the link to the topology master, which may be on another host
        self._liveness = DEFAULT_LIVENESS  # the topology's, once start() read it
        self.http_scheme = "https" if tls is not None else "http"
        self.container = container
        self.host = host
        self._secret = secret
        self._state = state
        self._paths = paths
        self._log = log
        self._max_frame = max_frame
        self.counters = Counters()
        self.bad_reports = 0
        self.interval = DEFAULT_INTERVAL_S
        self.log_caps = LogCaps()  # the topology's, read at start
        self.port = 0
        self.http_port = 0
        self._server: asyncio.Server | None = None
        self._http: MetricsHttp | None = None
        self._http_closed: asyncio.Task[None] | None = None
        self._follow: LocationFollower | None = None
        self._tm_loc: TManagerLocation | None = None
        self._tm_conn: Connection | None = None  # to the active master, while its session runs
        self._forward: asyncio.TimerHandle | None = None  # an early forward, scheduled
        # its parts (wiring.build): the store, the routes reports come by, the Prometheus registry
        parts = build(topology, container, self, paths.logs)
        self.store, self._routes, self._registry = parts.store, parts.routes, parts.registry

    async def start(self) -> None:
        self._begin()
        loop = asyncio.get_running_loop()
        try:  # signed under the secret: whoever may write the state store must not set our config
            topo = await loop.run_in_executor(None, self._state.get_topology, self.topology, self._secret)
        except StateManagerError as e:
            raise FatalError(f"metrics manager: {e}") from None
        if topo is None:
            raise FatalError(f"metrics manager: topology '{self.topology}' is not in the state manager")
        self.interval = export_interval(dict(topo.config)) or DEFAULT_INTERVAL_S
        try:  # reports and the master link use the topology's frame limit and heartbeats, like every daemon
            links = LinkConfig.from_config(topo.config)
            self.log_caps = LogCaps.from_config(topo.config)
            self._max_frame, liveness = links.max_frame, links.liveness
            self._liveness = liveness
        except ConfigError as e:
            raise FatalError(str(e)) from e
        try:
            handler = BaseHandler()  # no lifecycle to follow: a report stands alone
            self._server = await serve(self.host, 0, lambda: handler, self._secret, role="metricsmgr",
                                       log=self._log, counters=self.counters, max_frame=self._max_frame,
                                       routes=self._routes, liveness=liveness, server_id=str(self.container))
        except OSError as e:
            raise FatalError(f"metrics manager of container {self.container}: cannot listen on {self.host}: {e}") from e
        self.port = self._server.sockets[0].getsockname()[1]
        self._read_restarts()  # the executor wrote every process's count (0) before it started us
        # a restarted metrics manager takes its predecessor's port again when it is free, so a
        # Prometheus scrape config made by prometheus-config stays valid
        try:
            old = int(json.loads(self._paths.layout(self.container).metricsmgr.read_text())["http_port"])
        except (FileNotFoundError, ValueError, KeyError, TypeError):
            old = 0
        token = None if is_loopback(self.http_host) else scrape_token(self._secret)
        tls = self._tls.http if self._tls else None  # HTTPS with TLS on: the scrape token stays off the wire
        try:
            self._http = await serve_metrics(self._registry, self.http_host, old, token, tls)
        except OSError:
            self._http = await serve_metrics(self._registry, self.http_host, 0, token, tls)
        self.http_port = self._http.port
        write_atomically(self._paths.layout(self.container).metricsmgr,
                         json.dumps({"port": self.port, "http_port": self.http_port, "pid": os.getpid()}))
        self._log.info("metrics manager of container %d: reports on %s:%d, Prometheus at %s://%s:%d/metrics",
                       self.container, self.host, self.port, self.http_scheme, self.http_host, self.http_port)
        self._spawn(self._sink_loop())
        self._spawn(self._tm_loop())

    async def wait(self) -> int:
        code = await super().wait()
        if self._http_closed is not None:
            await self._http_closed  # stop() cannot await the HTTP runner's cleanup; the exit path does
        return code

    def stop(self) -> None:
        if not self._begin_stop():
            return
        if self._forward is not None:
            self._forward.cancel()
        if self._server is not None:
            self._server.close()
        if self._http is not None:
            self._http_closed = asyncio.get_running_loop().create_task(self._http.close())

    def own_counters(self) -> dict[str, float]:
        """What this process refused: a report it could not read, a connection shed at the caps
        or past the handshake deadline, a frame with a wrong tag or from a role that may not
        send it, a peer silent past the liveness timeout."""
        c = self.counters
        return {"__bad-reports": self.bad_reports, "__connections-shed": c.shed,
                "__handshake-timeouts": c.handshake_timeouts, "__bad-frames/auth": c.bad_frame_auth,
                "__bad-frames/role": c.bad_frame_role, "__silent-peers": c.silent_peers}

    def on_report(self, raw: bytes, peer: str) -> None:
        try:
            doc = parse_report(raw)
        except ReportError as e:
            self.bad_reports += 1
            self._log.warning("%s (from %s); dropped", e, peer)
            return
        before = self.store.latest.get(self.store.source_key(doc))
        self.store.update(doc)
        if doc.get("counters", {}).keys() - (before or {}).get("counters", {}).keys():
            self._forward_soon()

    def _forward_soon(self) -> None:
        """The master gets the container's reports within FORWARD_SOON_S (one forward for
        what comes in meanwhile); with no master connected, the session's first report will."""
        if self._forward is None and self._tm_conn is not None:
            self._forward = asyncio.get_running_loop().call_later(FORWARD_SOON_S, self._forward_now)

    def _forward_now(self) -> None:
        self._forward = None
        conn = self._tm_conn
        if conn is not None and conn.is_open:
            conn.send(self._tm_report())

    def _read_restarts(self) -> None:
        path = self._paths.layout(self.container).restarts
        try:
            data = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            return
        if isinstance(data, dict):
            self.store.restarts = {str(k): int(v) for k, v in data.items() if isinstance(v, int)}

    async def _sink_loop(self) -> None:
        sink = self._paths.container_logs(self.container) / "metrics.jsonl"
        while True:
            await asyncio.sleep(self.interval)
            self._read_restarts()
            if self.store.latest:
                self.write_sink_line(sink, self.store.sink_line(time.time()))

    def write_sink_line(self, sink: Path, line: str) -> None:
        """Appends one line to the file sink, rotating it first when it is over its cap: this
        process is its only writer and opens it for each line, so a rename loses nothing."""
        try:
            if rotate_by_rename(sink, self.log_caps):
                self._log.info("rotated %s (over %d bytes; %d old files kept)", sink.name, self.log_caps.max_bytes,
                               self.log_caps.keep)
        except OSError as e:
            self._log.warning("cannot rotate %s: %s", sink, e.strerror or e)
        with sink.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    def _tm_report(self) -> bytes:
        doc = {"kind": "metricsmgr", "container": self.container, "host": self.http_host, "http_port": self.http_port,
               "http_scheme": self.http_scheme,
               "time": time.time(), "reports": self.store.for_tm(), "exceptions": self.store.exception_list(),
               "exceptions_dropped": self.store.exceptions_dropped,
               "restarts": self.store.restarts, "interval": self.interval}
        return encode_frame(MsgType.METRICS_REPORT, json.dumps(doc).encode())

    async def _tm_loop(self) -> None:
        """Forwards the container's reports to the active topology master, following its
        location through the state manager's watch (a standby that takes over is found)."""
        assert self._stopped is not None
        follow = self._follow = LocationFollower(self._state, self.topology)
        await follow.start()
        try:
            await run_link("topology master", self._tm_connect, self._tm_session, stop=self._stopped,
                           log=self._log, retry_s=0.5, reconnect_s=0.2, wait=follow.wait_change)
        finally:
            follow.stop()

    async def _tm_connect(self) -> Connection:
        assert self._follow is not None
        conn, self._tm_loc = await connect_master(self._follow, Routed(_TM_ROUTES), self._secret, role="metricsmgr",
                                                  peer_id=str(self.container), log=self._log,
                                                  max_frame=self._max_frame, tls=self._tls, liveness=self._liveness)
        return conn

    async def _tm_session(self, conn: Connection) -> None:
        follow, loc = self._follow, self._tm_loc
        assert follow is not None and loc is not None
        self._tm_conn = conn
        try:
            while not follow.moved_from(loc):
                conn.send(self._tm_report())
                await follow.wait_change(self.interval)
            conn.close("topology master moved")
        finally:
            self._tm_conn = None


# the master sends nothing on the metrics manager's link to it
_TM_ROUTES = Routes("metricsmgr's master link", ())


def main(argv: list[str] | None = None) -> int:
    ap = statecfg.daemon_parser("metrics_manager")
    ap.add_argument("--container", type=int, required=True)
    args = ap.parse_args(argv)
    log = setup_logging(f"metricsmgr[{args.container}]")
    return run_with_state(args, log, lambda state: MetricsManager(
        topology=args.topology, container=args.container, secret=args.secret_file.read_bytes(), state=state,
        paths=TopologyPaths.of(args.topology, args.home), log=log, tls=PeerTls.load(args.tls_file, args.topology),
        http_host=args.host))
