"""The topology master's HTTP transport: aiohttp's server in front of the pure ``Api``
(http_api.py), which does all the routing and renders every answer.

Limits, because the port is open to anything that can reach the host:

- the request line and every header line at most ``MAX_HEAD`` bytes, at most ``MAX_HEADERS``
  header lines; over either: 431 with a plain-text reason;
- a client that has not sent a whole request within ``HEAD_TIMEOUT`` seconds of connecting
  (or of its last answer, on a keep-alive connection) is disconnected without an answer;
- only GET is served, and POST to ``/topologies/actions/ACTION`` (the page's actions); any
  other method is a 405;
- off loopback, every JSON request needs ``Authorization: Bearer <token>``: the topology's
  read token or its admin token (both derived from the topology secret:
  heron_py.common.handshake.http_read_token, http_admin_token); without either, 401. The
  page's static files carry no data and are served without it;
- a task's log (``/topologies/logs``) carries tuple data: it needs the read or admin token from
  anyone but a process of the master's own user on this host (``log_token``; the peer's uid is
  the kernel's record of its socket, ``http_guard.same_uid_peer``), on loopback too;
- an action needs the admin token everywhere, loopback included (``action_token``): anyone on
  the host may read the page, and a dashboard given the read token may read it from anywhere,
  but only who holds the admin token may stop the topology. A refused action is logged with the
  client's address (the action's own log line is ui_actions.py's);
- a request the parser cannot read is a 400 with a plain-text reason;
- a Host header that does not name this server (DNS rebinding) is a 421, every answer forbids
  framing, and at most 256 connections are open at once, shared fairly between sources
  (``heron_py.common.http_guard``).

aiohttp answers parse errors itself: always 400, as HTTP/1.0, with its parser's wording.
``_Protocol.handle_error`` replaces those answers with ours; it is the one place that leans
on aiohttp internals (tests/unit/topology_master/test_http_api.py pins the behaviour).
"""

from __future__ import annotations

import ast
import logging
import ssl
import urllib.parse
from dataclasses import dataclass

from aiohttp import web
from aiohttp.http import HttpVersion11
from aiohttp.http_exceptions import BadHttpMessage, BadStatusLine, HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from heron_py.common.guard import RateLimitedLog
from heron_py.common.handshake import authorized
from heron_py.common.http_guard import (
    CappedRunner,
    CappedServer,
    GuardedHandler,
    guard_middleware,
    same_uid_peer,
    secured,
)
from topology_master.http_api import MAX_HEAD, Api

MAX_HEADERS = 32
HEAD_TIMEOUT = 5.0
_TEXT = "text/plain; charset=utf-8"
_log = logging.getLogger("tmanager.http")
_refusals = RateLimitedLog(_log)  # a local user looping on refused log reads: at most 5 lines in 10 s


def parse_error_answer(exc: HttpProcessingError, max_head: int = MAX_HEAD) -> tuple[int, str]:
    """The status and plain-text body for a request aiohttp's parser rejected (pure)."""
    if isinstance(exc, LineTooLong):
        return 431, f"request head longer than {max_head} bytes"
    if isinstance(exc, BadHttpMessage) and "too many headers" in exc.message.lower():
        return 431, f"request head has more than {MAX_HEADERS} header lines"
    if isinstance(exc, BadStatusLine):
        return 400, f"expected a request line 'GET /path HTTP/1.1', found {_offending_line(exc)[:100]!r}"
    reason = exc.message.splitlines()[0].rstrip(":") if exc.message else type(exc).__name__
    return 400, f"bad request: {reason}"


def _offending_line(exc: BadStatusLine) -> str:
    # the pure-Python parser keeps the line; the C parser (llhttp) only quotes it in its
    # message, as a bytes literal on a line of its own
    if exc.line:
        return exc.line
    for line in exc.message.splitlines():
        text = line.strip()
        if text.startswith(("b'", 'b"')):
            try:
                raw = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                break
            if isinstance(raw, bytes):
                return raw.decode("latin-1")
    return exc.message.splitlines()[0] if exc.message else ""


class _Protocol(GuardedHandler):
    """aiohttp's per-connection protocol, with our answers to requests it cannot parse."""

    def handle_error(self, request: web.BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if not isinstance(exc, HttpProcessingError):
            return super().handle_error(request, status, exc, message)  # a bug in a handler: aiohttp's 500
        code, text = parse_error_answer(exc)
        _log.debug("HTTP client %s: %d %s", request.remote, code, text)
        # the parser failed before it learned the client's version, so aiohttp would write
        # "HTTP/1.0"; this server speaks HTTP/1.1 (and clients check the status line)
        request._version = HttpVersion11
        resp = web.Response(status=code, text=text, content_type="text/plain", charset="utf-8",
                            headers={"Cache-Control": "no-store"})
        resp.force_close()  # the rest of the stream cannot be trusted
        return secured(resp)


class _Server(CappedServer):
    def protocol(self) -> RequestHandler:
        return _Protocol(self, loop=self._loop, **self._kwargs)


class _Runner(CappedRunner):
    # the same server with our protocol class and the connection cap
    server_class = _Server


@dataclass
class HttpServer:
    """A running server: its port, and ``close`` (the runner's cleanup)."""

    runner: web.AppRunner
    port: int

    async def close(self) -> None:
        await self.runner.cleanup()


UNAUTHORIZED = ("this HTTP API is not on loopback: expected the header 'Authorization: Bearer TOKEN' with the "
                "topology's read or admin token (heron-py status prints the page's address with them), found {found}")
LOG_UNAUTHORIZED = ("a task's log needs the header 'Authorization: Bearer TOKEN' with the topology's read or admin "
                    "token from anyone but the topology's own user on this host (heron-py status prints the page's "
                    "address with them), found {found}")
ACTION_UNAUTHORIZED = ("an action needs the header 'Authorization: Bearer TOKEN' with the topology's admin token, on "
                       "loopback too (heron-py status prints the page's address with it), found {found}")
ACTIONS_PREFIX = "/topologies/actions/"
LOGS_PATH = "/topologies/logs"


def _text(code: int, text: str, **headers: str) -> web.Response:
    return web.Response(status=code, text=text, content_type="text/plain", charset="utf-8",
                        headers={"Cache-Control": "no-store", **headers})


def _any_of(header: str | None, *tokens: str | None) -> bool:
    """Whether ``header`` carries one of the tokens that are set."""
    return any(t is not None and authorized(header, t) for t in tokens)


def make_app(api: Api, token: str | None = None, action_token: str | None = None,
             bound: str = "127.0.0.1", log_token: str | None = None) -> web.Application:
    """``token``: what every JSON read needs (None: reads are open, on loopback); ``log_token``:
    what a log read needs from a peer not proven to be this process's own user (None: as any
    read); ``action_token``: what an action needs (None: no actions), also good for reads."""

    async def route(request: web.Request) -> web.Response:
        # the raw target, as the pure router has always read it (no normalisation by yarl)
        url = urllib.parse.urlsplit(request.raw_path)
        action = request.method == "POST" and url.path.startswith(ACTIONS_PREFIX)
        if request.method != "GET" and not action:
            return _text(405, f"method {request.method[:10]!r} not allowed; expected GET")
        static = url.path in ("/", "/index.html") or url.path.startswith("/static/")
        header = request.headers.get("Authorization")
        found = "no Authorization header" if header is None else "a wrong token"
        if action and not _any_of(header, action_token):
            _log.warning("web action %s from %s refused: %s", url.path[len(ACTIONS_PREFIX):][:40], request.remote,
                         found)
            return _text(401, ACTION_UNAUTHORIZED.format(found=found), **{"WWW-Authenticate": "Bearer"})
        if not static and not action and token is not None and not _any_of(header, token, action_token):
            return _text(401, UNAUTHORIZED.format(found=found), **{"WWW-Authenticate": "Bearer"})
        if url.path == LOGS_PATH and log_token is not None and not _any_of(header, log_token, action_token) \
                and not same_uid_peer(request.transport):
            _refusals.warning("log read %s from %s refused: %s", url.query[:40], request.remote, found,
                              kind="log read")
            return _text(401, LOG_UNAUTHORIZED.format(found=found), **{"WWW-Authenticate": "Bearer"})
        code, ctype, body = api.handle(url.path, urllib.parse.parse_qs(url.query), request.method,
                                       str(request.remote))
        return web.Response(status=code, body=body, headers={"Content-Type": ctype, "Cache-Control": "no-store"})

    app = web.Application(middlewares=[guard_middleware(bound)])
    app.router.add_route("*", "/{tail:.*}", route)
    return app


async def serve_http(api: Api, host: str, *, head_timeout: float = HEAD_TIMEOUT,
                     token: str | None = None, action_token: str | None = None, log_token: str | None = None,
                     ssl_context: ssl.SSLContext | None = None) -> HttpServer:
    """Serves ``api`` on ``host``, a port chosen by the system; close with ``HttpServer.close``.
    The tokens are ``make_app``'s. With ``ssl_context``, HTTPS only."""
    runner = _Runner(
        make_app(api, token, action_token, bound=host, log_token=log_token),
        access_log=None,  # the web page polls every few seconds: no line per request in the master's log
        max_line_size=MAX_HEAD, max_field_size=MAX_HEAD, max_headers=MAX_HEADERS,
        # aiohttp's keep-alive timer also runs from the moment a connection opens until a whole
        # request has arrived, so it is the slow-client timeout too
        keepalive_timeout=head_timeout,
        shutdown_timeout=1.0,  # answers are computed at once: nothing worth waiting for at stop
    )
    await runner.setup()
    site = web.TCPSite(runner, host, 0, ssl_context=ssl_context)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return HttpServer(runner, site.port)
