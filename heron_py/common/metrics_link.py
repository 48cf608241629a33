"""A process's link to its container's metrics manager: the stream manager's and each instance's.

The metrics manager writes its port to ``metricsmgr.json`` in the container's folder once it
listens; the link reads it at every try, connects on loopback as ``role``/``peer_id`` (the
metrics manager must prove ``expect`` in the handshake, when given), and is kept up by
``heron_py.common.reconnect.run_link``. Each session sends one JSON report (``report()``, a
value JSON cannot encode goes as its ``repr``) at once and then every ``interval()`` seconds;
the interval is read again before each report, so a new one (from a new physical plan) applies
from the next, and while it is 0 nothing is sent. The metrics manager sends nothing back: any
frame from it is refused.

``send_now`` reports at once when connected; when not, the report is owed and the link tries to
connect every ``OWED_RETRY_S`` instead of its ordinary ``retry_s``, and the new session's first
report pays it (an instance whose task dies at start, maybe before its container's metrics
manager is up, reports its exception this way). ``sent`` is set by each report that goes out,
for a caller in another thread to wait on.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from heron_py.common.framing import MsgType, encode_frame
from heron_py.common.handshake import PeerIdentity
from heron_py.common.net import DEFAULT_LIVENESS, Connection, Liveness, Routed, Routes, connect
from heron_py.common.reconnect import Unreachable, run_link

# how soon a link that owes a report (``send_now`` while not connected) tries to connect again:
# a task that dies at start may do so before its container's metrics manager is up, and its
# exception would be lost if the link waited out its ordinary retry
OWED_RETRY_S = 0.05
# while the interval is 0 (no reports), how often it is read again
IDLE_S = 1.0


class MetricsLink:
    """Sends ``report()`` to the container's metrics manager every ``interval()`` seconds (none
    while it is 0), on the loop that runs it; ``send_now`` sends one at once, or as soon as the
    link is up."""

    def __init__(self, *, mm_file: Path, host: str, secret: bytes, role: str, peer_id: str,
                 expect: PeerIdentity | None, log: logging.Logger, max_frame: int,
                 report: Callable[[], dict[str, Any]], interval: Callable[[], float],
                 liveness: Liveness = DEFAULT_LIVENESS, retry_s: float = 1.0) -> None:
        self._mm_file = mm_file
        self._host = host
        self._secret = secret
        self._role = role
        self._peer_id = peer_id
        self._expect = expect
        self._log = log
        self._max_frame = max_frame
        self._report = report
        self._interval = interval
        self._liveness = liveness
        self._retry_s = retry_s
        self._routes = Routes(f"{role}'s metrics link", ())
        self._conn: Connection | None = None  # while a session runs
        self.sent = threading.Event()
        # set while a report is owed (send_now before a connection); bound to the link's loop at
        # its first use there
        self._owed = asyncio.Event()

    def send(self) -> None:
        """On the loop: a report now, if connected (else nothing)."""
        conn = self._conn
        if conn is not None and conn.is_open:
            conn.send(encode_frame(MsgType.METRICS_REPORT, json.dumps(self._report(), default=repr).encode()))
            self._owed.clear()
            self.sent.set()

    def send_now(self) -> None:
        """On the loop: a report at once when connected; else the report is owed, and the link
        tries to connect every ``OWED_RETRY_S`` until its session's first report pays it."""
        conn = self._conn
        if conn is not None and conn.is_open:
            self.send()
        else:
            self._owed.set()

    async def run(self, stop: asyncio.Event) -> None:
        await run_link("metrics manager", self._connect, self._session, stop=stop, log=self._log,
                       retry_s=self._retry_s, reconnect_s=0.2, wait=self._wait)

    async def _wait(self, seconds: float) -> None:
        """``run_link``'s wait between tries, cut short when a report becomes owed."""
        owed = self._owed
        if owed.is_set():
            await asyncio.sleep(min(seconds, OWED_RETRY_S))
            return
        try:
            await asyncio.wait_for(owed.wait(), seconds)
        except TimeoutError:
            pass

    async def _connect(self) -> Connection:
        try:
            port = int(json.loads(self._mm_file.read_text())["port"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise Unreachable(f"metrics manager not found in {self._mm_file} yet ({e!r}); retrying") from e
        return await connect(self._host, port, Routed(self._routes), self._secret, role=self._role,
                             peer_id=self._peer_id, log=self._log, max_frame=self._max_frame,
                             liveness=self._liveness, expect=self._expect)

    async def _session(self, conn: Connection) -> None:
        self._conn = conn
        try:
            while conn.is_open:
                interval = self._interval()
                if interval > 0:
                    self.send()
                await asyncio.sleep(interval if interval > 0 else IDLE_S)
        finally:
            self._conn = None
