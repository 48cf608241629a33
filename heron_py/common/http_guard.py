"""What every HTTP endpoint of heron-py (the master's API and page, the metrics managers'
Prometheus endpoints) does before routing, on aiohttp.

- **A connection cap** (``MAX_HTTP_CONNECTIONS`` per port): a connection beyond it is closed at
  accept, so a flood of idle connections cannot use up the process's file descriptors, which its
  state writes, checkpoints and logs need too (an EMFILE there is worse than a refused client).
- **The Host header** (``host_allowed``): a browser tricked by DNS rebinding sends the
  attacker's name as Host while it talks to 127.0.0.1; only IP literals, ``localhost``, this
  machine's names and the address the server binds are accepted, so such a page reads nothing.
- **Security headers** (``SECURITY_HEADERS``): no framing of our pages by another site.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from functools import cache
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

MAX_HTTP_CONNECTIONS = 256
SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}
_log = logging.getLogger("heron_py.http")


class _Refused(asyncio.Protocol):
    """What a connection over the cap gets: closed at once, nothing read."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.abort()  # type: ignore[attr-defined]


class CappedServer(web.Server):
    """aiohttp's server with at most ``limit`` connections at a time."""

    limit = MAX_HTTP_CONNECTIONS
    refused = 0

    def protocol(self) -> RequestHandler:
        """The protocol of an accepted connection under the cap (subclasses replace it)."""
        return super().__call__()

    def __call__(self) -> RequestHandler:
        if len(self._connections) >= self.limit:
            type(self).refused += 1
            if type(self).refused % 100 == 1:
                _log.warning("refusing HTTP connections: %d open, the cap (%d refused so far)", self.limit,
                             type(self).refused)
            return _Refused()  # type: ignore[return-value]
        return self.protocol()


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


def guard_middleware(bound: str) -> Any:
    """aiohttp middleware: the Host check, then the security headers on every answer."""

    @web.middleware
    async def guard(request: web.Request, handler: Any) -> web.StreamResponse:
        host = request.headers.get("Host")
        if not host_allowed(host, bound):
            return misdirected(host)
        resp: web.StreamResponse = await handler(request)
        for k, v in SECURITY_HEADERS.items():
            resp.headers.setdefault(k, v)
        return resp

    return guard
