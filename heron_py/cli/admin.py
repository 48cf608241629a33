"""The CLI's side of the topology master's admin port."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from heron_py.common.daemon import run_until_complete
from heron_py.common.framing import MsgType
from heron_py.common.net import BaseHandler, Connection, connect, parse
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
        try:
            conn = await connect(loc.host, loc.port, reply, secret, role="cli", peer_id="cli",
                                 log=logging.getLogger("heron-py"), timeout=timeout)
        except (TimeoutError, OSError, ConnectionError) as e:
            raise AdminError(f"topology master of '{name}' at {loc.host}:{loc.port} is not reachable: {e}") from e
        try:
            conn.send_msg(MsgType.ADMIN_REQUEST, pb.AdminRequest(command=command))
            return await asyncio.wait_for(reply.future, timeout)
        finally:
            conn.close()

    result: pb.AdminResponse = run_until_complete(go())
    return result


def live_status(state: StateManager, name: str) -> dict[str, Any] | None:
    try:
        resp = admin_command(state, name, "status", timeout=3.0)
    except (TimeoutError, AdminError):
        return None
    data: dict[str, Any] = json.loads(resp.status_json)
    return data
