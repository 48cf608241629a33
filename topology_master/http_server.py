"""The topology master's HTTP transport: aiohttp's server in front of the pure ``Api``
(http_api.py), which does all the routing and renders every answer.

Limits, because the port is open to anything that can reach the host:

- the request line and every header line at most ``MAX_HEAD`` bytes, at most ``MAX_HEADERS``
  header lines; over either: 431 with a plain-text reason;
- a client that has not sent a whole request within ``HEAD_TIMEOUT`` seconds of connecting
  (or of its last answer, on a keep-alive connection) is disconnected without an answer;
- only GET is served, and POST to ``/topologies/actions/ACTION`` (the page's actions); any
  other method is a 405;
- off loopback, every JSON request needs ``Authorization: Bearer <token>`` (the token is
  derived from the topology secret: heron_py.common.handshake.http_token); without it, 401.
  The page's static files carry no data and are served without it;
- an action needs the token everywhere, loopback included (``action_token``): anyone on the
  host may read the page, only who holds the topology's secret may stop it. A refused action
  is logged with the client's address (the action's own log line is ui_actions.py's);
- a request the parser cannot read is a 400 with a plain-text reason;
- a Host header that does not name this server (DNS rebinding) is a 421, every answer forbids
  framing, and at most 256 connections are open at once (``heron_py.common.http_guard``).

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

from heron_py.common.handshake import authorized
from heron_py.common.http_guard import CappedRunner, CappedServer, guard_middleware
from topology_master.http_api import MAX_HEAD, Api

MAX_HEADERS = 32
HEAD_TIMEOUT = 5.0
_TEXT = "text/plain; charset=utf-8"
_log = logging.getLogger("tmanager.http")


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


class _Protocol(RequestHandler):
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
        return resp


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
                "topology's token (heron-py status and metrics send it; heron-py status prints the page's address "
                "with it), found {found}")


ACTION_UNAUTHORIZED = ("an action needs the header 'Authorization: Bearer TOKEN' with the topology's token, on "
                       "loopback too (heron-py status prints the page's address with it), found {found}")
ACTIONS_PREFIX = "/topologies/actions/"


def _text(code: int, text: str, **headers: str) -> web.Response:
    return web.Response(status=code, text=text, content_type="text/plain", charset="utf-8",
                        headers={"Cache-Control": "no-store", **headers})


def make_app(api: Api, token: str | None = None, action_token: str | None = None,
             bound: str = "127.0.0.1") -> web.Application:
    async def route(request: web.Request) -> web.Response:
        # the raw target, as the pure router has always read it (no normalisation by yarl)
        url = urllib.parse.urlsplit(request.raw_path)
        action = request.method == "POST" and url.path.startswith(ACTIONS_PREFIX)
        if request.method != "GET" and not action:
            return _text(405, f"method {request.method[:10]!r} not allowed; expected GET")
        static = url.path in ("/", "/index.html") or url.path.startswith("/static/")
        header = request.headers.get("Authorization")
        found = "no Authorization header" if header is None else "a wrong token"
        if action and (action_token is None or not authorized(header, action_token)):
            _log.warning("web action %s from %s refused: %s", url.path[len(ACTIONS_PREFIX):][:40], request.remote,
                         found)
            return _text(401, ACTION_UNAUTHORIZED.format(found=found), **{"WWW-Authenticate": "Bearer"})
        if not static and not action and not authorized(header, token):
            return _text(401, UNAUTHORIZED.format(found=found), **{"WWW-Authenticate": "Bearer"})
        code, ctype, body = api.handle(url.path, urllib.parse.parse_qs(url.query), request.method,
                                       str(request.remote))
        return web.Response(status=code, body=body, headers={"Content-Type": ctype, "Cache-Control": "no-store"})

    app = web.Application(middlewares=[guard_middleware(bound)])
    app.router.add_route("*", "/{tail:.*}", route)
    return app


async def serve_http(api: Api, host: str, *, head_timeout: float = HEAD_TIMEOUT,
                     token: str | None = None, action_token: str | None = None,
                     ssl_context: ssl.SSLContext | None = None) -> HttpServer:
    """Serves ``api`` on ``host``, a port chosen by the system; close with ``HttpServer.close``.
    With ``token``, JSON requests must carry it as a bearer token; actions always need
    ``action_token`` (none: no actions). With ``ssl_context``, HTTPS only."""
    runner = _Runner(
        make_app(api, token, action_token, bound=host),
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
