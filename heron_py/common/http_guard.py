"""What every HTTP endpoint of heron-py (the master's API and page, the metrics managers'
Prometheus endpoints) does before routing, on aiohttp.

- **A connection cap** (``MAX_HTTP_CONNECTIONS`` per port), shared fairly between sources: a
  connection beyond it is not refused; the source address holding the most connections gives
  up its oldest one, which is aborted. A flood of idle connections cannot use up the process's
  file descriptors, which its state writes, checkpoints and logs need too (an EMFILE there is
  worse than a refused client); and, as on the framed ports (``guard.py``), it cannot keep
  anyone out either: a flooder's oldest connections go first, so a request gets in unless the
  flooder opens the whole cap anew while that one request is answered, and another source's
  connections are taken only once it holds as many as the flooder.
- **The Host header** (``host_allowed``): a browser tricked by DNS rebinding sends the
  attacker's name as Host while it talks to 127.0.0.1; only IP literals, ``localhost``, this
  machine's names and the address the server binds are accepted, so such a page reads nothing.
- **Security headers** (``SECURITY_HEADERS``): no framing of our pages by another site, on every
  answer: routed ones, the 421, and the answers to requests the parser refused.
- **The peer's uid** (``same_uid_peer``): whether a connection comes from a process of this
  server's own user on this host, for what loopback alone does not decide (a task's log).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import socket
import struct
from collections import OrderedDict
from functools import cache
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from heron_py.common.guard import RateLimitedLog

MAX_HTTP_CONNECTIONS = 256
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}
_log = logging.getLogger("heron_py.http")
_rate_limited = RateLimitedLog(_log)


class GuardedHandler(RequestHandler):
    """aiohttp's per-connection protocol, whose own answers (to a request its parser refused)
    carry the security headers as every routed answer does."""

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        return secured(super().handle_error(request, status, exc, message))


class CappedServer(web.Server):
    """aiohttp's server with at most ``limit`` connections at a time, shared fairly between
    source addresses (the module docstring says how)."""

    limit = MAX_HTTP_CONNECTIONS
    evicted = 0  # over every server of the process: what the log line counts

    def protocol(self) -> RequestHandler:
        """The protocol of an accepted connection (subclasses replace it)."""
        return GuardedHandler(self, loop=self._loop, **self._kwargs)

    def __call__(self) -> RequestHandler:
        return self.protocol()

    def _sources(self) -> dict[str, OrderedDict[RequestHandler, asyncio.Transport]]:
        by_source: dict[str, OrderedDict[RequestHandler, asyncio.Transport]] | None = getattr(
            self, "_by_source", None)
        if by_source is None:  # set here: CappedRunner swaps the class of a server already made
            by_source = {}
            self._by_source = by_source
        return by_source

    def connection_made(self, handler: RequestHandler, transport: asyncio.Transport) -> None:
        super().connection_made(handler, transport)
        sources = self._sources()
        sources.setdefault(source_of(transport), OrderedDict())[handler] = transport
        if sum(len(q) for q in sources.values()) <= self.limit:
            return
        # the source holding the most gives up its oldest; never the newcomer itself
        greedy = max((s for s, q in sources.items() if any(h is not handler for h in q)),
                     key=lambda s: len(sources[s]))
        queue = sources[greedy]
        victim = next(h for h in queue if h is not handler)
        victim_transport = queue.pop(victim)
        if not queue:
            del sources[greedy]
        type(self).evicted += 1
        _rate_limited.warning("HTTP connections at the cap (%d): closed the oldest of %s, which holds the most "
                              "(%d closed so far)", self.limit, greedy or "an unknown source", type(self).evicted,
                              kind="http cap")
        victim_transport.abort()

    def connection_lost(self, handler: RequestHandler, exc: BaseException | None = None) -> None:
        super().connection_lost(handler, exc)
        sources = self._sources()
        for source, queue in list(sources.items()):
            if queue.pop(handler, None) is not None:
                if not queue:
                    del sources[source]
                break


def source_of(transport: asyncio.BaseTransport) -> str:
    """The peer's address without its port (a flooder's connections share it)."""
    peer = transport.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else ""


class CappedRunner(web.AppRunner):
    """An AppRunner whose server is ``server_class`` (aiohttp has no public hook for it)."""

    server_class: type[CappedServer] = CappedServer

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = self.server_class
        return server


@cache
def _own_names() -> frozenset[str]:
    names = {"localhost", "localhost.localdomain"}
    try:
        names.add(socket.gethostname().lower())
        names.add(socket.getfqdn().lower())
    except OSError:
        pass
    return frozenset(names)


def host_allowed(host_header: str | None, bound: str) -> bool:
    """Whether a request's Host header names this server: an IP literal, localhost, this
    machine's name or the host it binds; no header at all (HTTP/1.0 clients) is allowed."""
    if not host_header:
        return True
    host = host_header.strip().lower()
    if host.startswith("["):  # [v6]:port
        host = host[1:host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.rsplit(":", 1)[0]
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    return host in _own_names() or host == bound.lower()


def misdirected(host_header: str | None) -> web.Response:
    return web.Response(status=421, text=f"Host {str(host_header)[:100]!r} is not this server's (DNS rebinding?); "
                                         f"expected an IP address, localhost or this machine's name",
                        content_type="text/plain", charset="utf-8", headers={"Cache-Control": "no-store"})


def secured(resp: web.StreamResponse) -> web.StreamResponse:
    """``resp`` with the security headers (a header the answer sets itself is kept)."""
    for k, v in SECURITY_HEADERS.items():
        resp.headers.setdefault(k, v)
    return resp


def guard_middleware(bound: str) -> Any:
    """aiohttp middleware: the Host check, then the security headers on every answer."""

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        host = request.headers.get("Host")
        if not host_allowed(host, bound):
            return secured(misdirected(host))
        try:
            return secured(await handler(request))
        except web.HTTPException as e:  # the router's own 404 and 405 are raised, not returned
            secured(e)
            raise

    return guard


# /proc/net/tcp's columns: sl, local_address, rem_address, st, tx_queue:rx_queue, tr:tm->when,
# retrnsmt, uid
_PROC_NET = {socket.AF_INET: Path("/proc/net/tcp"), socket.AF_INET6: Path("/proc/net/tcp6")}


def _proc_address(ip: str, port: int) -> str:
    """An address as /proc/net/tcp prints it: the address's 32-bit words each in host byte
    order, in hex, then the port."""
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    raw = socket.inet_pton(family, ip)
    words = struct.unpack(f"={len(raw) // 4}I", raw)
    return "".join(f"{w:08X}" for w in words) + f":{port:04X}"


def tcp_peer_uid(peer: tuple[Any, ...], local: tuple[Any, ...],
                 proc_net: dict[int, Path] | None = None) -> int | None:
    """The uid owning the other end of a TCP connection on this host (this server's socket has
    ``local``, the peer's has ``peer``): the kernel's own record of the peer's socket in
    /proc/net/tcp or tcp6, whose local address is the peer and whose remote address is us.
    None when no such socket is there (a peer on another host, or not Linux)."""
    ip = str(peer[0])
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    try:
        want_local, want_remote = _proc_address(ip, int(peer[1])), _proc_address(str(local[0]), int(local[1]))
        lines = (proc_net or _PROC_NET)[family].read_text().splitlines()[1:]
    except (OSError, ValueError, KeyError, IndexError):
        return None
    for line in lines:
        cols = line.split()
        if len(cols) > 7 and cols[1] == want_local and cols[2] == want_remote:
            try:
                return int(cols[7])
            except ValueError:
                return None
    return None


def same_uid_peer(transport: asyncio.BaseTransport | None) -> bool:
    """Whether the peer is a process of this server's own user on this host, as the kernel says
    it: SO_PEERCRED for a Unix socket, the peer socket's owner for TCP over loopback. Anything
    it cannot tell is another user."""
    if transport is None:
        return False
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        try:
            creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        except OSError:
            return False
        return bool(struct.unpack("3i", creds)[1] == os.geteuid())
    peer, local = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
    if not (isinstance(peer, tuple) and isinstance(local, tuple)):
        return False
    try:
        loopback = ipaddress.ip_address(str(peer[0]).split("%")[0]).is_loopback
    except ValueError:
        return False
    return loopback and tcp_peer_uid(peer, local) == os.geteuid()
