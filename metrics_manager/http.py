"""The metrics manager's Prometheus endpoint: ``GET /metrics`` in Prometheus' text format
(prometheus-client renders it from the store), on aiohttp.

It binds the container's address. Off loopback, a scrape must carry the topology's bearer
token (``Authorization: Bearer <scrape_token(secret)>``, not the token of the master's API and
actions; ``heron-py prometheus-config
--scrape-config`` prints a Prometheus job that sends it); without it the answer is 401.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from heron_py.common.handshake import authorized
from heron_py.common.http_guard import CappedRunner, guard_middleware

HEAD_TIMEOUT = 5.0
MAX_HEAD = 8190
MAX_HEADERS = 32

UNAUTHORIZED = ("this metrics endpoint is not on loopback: expected the header 'Authorization: Bearer TOKEN' "
                "with the topology's token (heron-py prometheus-config --scrape-config prints a job that sends it)")


@dataclass
class MetricsHttp:
    runner: web.AppRunner
    port: int

    async def close(self) -> None:
        await self.runner.cleanup()


def make_app(registry: CollectorRegistry, token: str | None, bound: str = "127.0.0.1") -> web.Application:
    async def metrics(request: web.Request) -> web.Response:
        if not authorized(request.headers.get("Authorization"), token):
            return web.Response(status=401, text=UNAUTHORIZED, headers={"WWW-Authenticate": "Bearer"})
        return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application(middlewares=[guard_middleware(bound)])
    app.router.add_get("/metrics", metrics)
    return app


async def serve_metrics(registry: CollectorRegistry, host: str, port: int, token: str | None,
                        ssl_context: ssl.SSLContext | None = None) -> MetricsHttp:
    """Serves on ``port`` (0: any); raises OSError when it is taken. With ``ssl_context``
    (the topology's TLS is on), HTTPS only: the scrape token never crosses in clear."""
    # a client that has not sent a whole request within HEAD_TIMEOUT is disconnected (aiohttp's
    # keep-alive timer runs from the connection's start too), so a slowloris cannot hold
    # connections; the request line and header lines are bounded as on the master's API
    runner = CappedRunner(make_app(registry, token, bound=host), access_log=None, shutdown_timeout=1.0,
                           keepalive_timeout=HEAD_TIMEOUT, max_line_size=MAX_HEAD, max_field_size=MAX_HEAD,
                           max_headers=MAX_HEADERS)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    return MetricsHttp(runner, site.port)
