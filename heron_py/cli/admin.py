"""The CLI's side of the topology master's admin port."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from heron_py.common.daemon import run_until_complete
from heron_py.common.framing import MsgType
from heron_py.common.handshake import http_token
from heron_py.common.net import BaseHandler, Connection, connect, parse
from heron_py.common.tls import PeerTls, TlsMaterial, tls_client_args
from heron_py.state import StateManager
from proto import heron_py_pb2 as pb


class AdminError(Exception):
    pass


class _Reply(BaseHandler):
    def __init__(self) -> None:
        self.future: asyncio.Future[pb.AdminResponse] = asyncio.get_running_loop().create_future()

    def on_frame(self, conn: Connection, msg_type: int, frame: bytes) -> None:
        if msg_type == MsgType.ADMIN_RESPONSE and not self.future.done():
            resp = pb.AdminResponse()
            parse(resp, frame)
            self.future.set_result(resp)

    def on_close(self, conn: Connection) -> None:
        if not self.future.done():
            self.future.set_exception(AdminError("topology master closed the connection"))


def admin_command(state: StateManager, name: str, command: str, timeout: float = 10.0) -> pb.AdminResponse:
    loc = state.get_tmanager_location(name)
    secret = state.get_secret(name)
    if loc is None or secret is None:
        raise AdminError(f"topology '{name}' is not running (no topology master in the state manager)")

    async def go() -> pb.AdminResponse:
        reply = _Reply()
        raw_tls = state.get_tls(name)
        tls = PeerTls.of(TlsMaterial.from_bytes(raw_tls), name) if raw_tls is not None else None
        try:
            conn = await connect(loc.host, loc.port, reply, secret, role="cli", peer_id="cli",
                                 log=logging.getLogger("heron-py"), timeout=timeout,
                                 **tls_client_args(tls))
        except (TimeoutError, OSError, ConnectionError) as e:
            raise AdminError(f"topology master of '{name}' at {loc.host}:{loc.port} is not reachable: {e}") from e
        try:
            conn.send_msg(MsgType.ADMIN_REQUEST, pb.AdminRequest(command=command))
            return await asyncio.wait_for(reply.future, timeout)
        finally:
            conn.close()

    result: pb.AdminResponse = run_until_complete(go())
    return result


def tm_get(state: StateManager, name: str, path: str, params: dict[str, Any] | None = None,
           timeout: float = 5.0) -> Any:
    """GET from the topology master's HTTP API; returns the tracker envelope's result."""
    import urllib.error
    import urllib.parse
    import urllib.request

    loc = state.get_tmanager_location(name)
    if loc is None or not loc.http_port:
        raise AdminError(f"topology '{name}' is not running (no topology master HTTP API in the state manager)")
    url = f"http://{loc.host}:{loc.http_port}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params, doseq=True)
    request = urllib.request.Request(url)
    secret = state.get_secret(name)
    if secret is not None:  # needed off loopback; harmless on it
        request.add_header("Authorization", f"Bearer {http_token(secret)}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as r:
            doc = json.loads(r.read())
    except urllib.error.HTTPError as e:
        try:
            doc = json.loads(e.read())
        except ValueError:
            doc = {"message": str(e)}
        raise AdminError(str(doc.get("message") or e)) from None
    except (OSError, ValueError) as e:
        raise AdminError(f"topology master of '{name}' at {loc.host}:{loc.http_port} is not reachable: {e}") from e
    return doc["result"]


def live_status(state: StateManager, name: str) -> dict[str, Any] | None:
    """The execution state from the active topology master's HTTP API (None if unreachable)."""
    try:
        data: dict[str, Any] = tm_get(state, name, "/topologies/execution_state", timeout=3.0)
    except AdminError:
        return None
    return data
