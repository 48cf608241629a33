"""The CLI's side of the topology master's admin port."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from heron_py.cli.errors import AdminError as AdminError  # raised here; kept importable from here
from heron_py.common.daemon import run_until_complete
from heron_py.common.handshake import HandshakeError, http_read_token
from heron_py.common.net import Connection, Routed, Routes, connect, on
from heron_py.common.tls import PeerTls, TlsMaterial, https_client_context, tls_client_args
from heron_py.state import StateManager, TManagerLocation
from proto import heron_py_pb2 as pb


class _Reply(Routed):
    """The master's one answer; anything else it sends is refused by the connection."""

    def __init__(self) -> None:
        super().__init__(Routes("cli", [on("tmanager", pb.AdminResponse, self._answer)]))
        self.future: asyncio.Future[pb.AdminResponse] = asyncio.get_running_loop().create_future()

    def _answer(self, conn: Connection, resp: pb.AdminResponse) -> None:
        if not self.future.done():
            self.future.set_result(resp)

    def on_close(self, conn: Connection) -> None:
        if not self.future.done():
            self.future.set_exception(AdminError("topology master closed the connection"))


# a submitted topology whose master is being replaced (a frozen or killed master relaunched, or a
# standby taking over) has no location for a few seconds: a command waits this long for one
MASTER_WAIT_S = 15.0


def master_of(state: StateManager, name: str, wait_s: float = MASTER_WAIT_S,
              clock: Callable[[], float] = time.monotonic,
              sleep: Callable[[float], None] = time.sleep) -> tuple[TManagerLocation, bytes]:
    """The live master's location and the topology's secret. A topology never submitted (no
    secret) is refused at once; a submitted one without a live master is waited for up to
    ``wait_s``, then refused."""
    deadline = clock() + wait_s
    while True:
        secret = state.get_secret(name)
        if secret is None:
            raise AdminError(f"topology '{name}' is not running (no topology master in the state manager)")
        loc = state.get_tmanager_location(name)
        if loc is not None:
            return loc, secret
        if clock() >= deadline:
            raise AdminError(f"topology '{name}' has no live topology master: none registered in {wait_s:g} s "
                             f"(its executors relaunch a dead one; see 'heron-py logs')")
        sleep(0.2)


def admin_command(state: StateManager, name: str, command: str, timeout: float = 10.0) -> pb.AdminResponse:
    loc, secret = master_of(state, name)

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
        except HandshakeError as e:
            # a stale location whose port another process (another topology's daemon) took
            raise AdminError(f"topology master of '{name}' at {loc.host}:{loc.port} refused the CLI: {e} "
                             f"(expected the master of '{name}'; is the location in the state manager stale?)") from e
        try:
            conn.send_msg(pb.AdminRequest(command=command))
            return await asyncio.wait_for(reply.future, timeout)
        finally:
            conn.close()

    result: pb.AdminResponse = run_until_complete(go())
    return result


def tm_get(state: StateManager, name: str, path: str, params: dict[str, Any] | None = None,
           timeout: float = 5.0) -> Any:
    """GET from the topology master's HTTP API; returns the tracker envelope's result.

    The token goes only where it is needed and only to the topology's own master: on loopback
    the API is read without one (a stale address whose port another local user took gets
    nothing); off loopback the read token (never the admin one) goes only over HTTPS to a
    server whose certificate verifies against the topology's CA, which only the topology's
    daemons hold (heron_py.common.tls)."""
    import urllib.error
    import urllib.parse
    import urllib.request

    from heron_py.common.host import is_loopback

    loc = state.get_tmanager_location(name)
    if loc is None or not loc.http_port:
        raise AdminError(f"topology '{name}' is not running (no topology master HTTP API in the state manager)")
    url = f"{loc.http_scheme}://{loc.host}:{loc.http_port}{path}"
    loopback = is_loopback(loc.host)
    if not loopback and loc.http_scheme != "https":
        raise AdminError(f"topology master of '{name}' at {loc.host}:{loc.http_port} serves plain HTTP off loopback; "
                         f"expected HTTPS under the topology's certificate (heron.network.tls.enabled, on by default "
                         f"off loopback), found http: the CLI does not send the topology's token in clear")
    context = None
    if loc.http_scheme == "https":
        raw_tls = state.get_tls(name)
        if raw_tls is None:
            raise AdminError(f"topology master of '{name}' serves HTTPS, but the state manager holds no TLS material "
                             f"for '{name}' to verify it with")
        context = https_client_context(TlsMaterial.from_bytes(raw_tls))
    if params:
        url += "?" + urllib.parse.urlencode(params, doseq=True)
    request = urllib.request.Request(url)
    secret = None if loopback else state.get_secret(name)
    if secret is not None:
        request.add_header("Authorization", f"Bearer {http_read_token(secret)}")
    try:
        with _opener(context).open(request, timeout=timeout) as r:
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


def _opener(context: Any) -> Any:
    """urllib's opener, with ``context`` for HTTPS, that follows no redirect: the master never
    sends one, and urllib would carry the Authorization header to wherever it points."""
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    handlers: list[Any] = [NoRedirect()]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


def live_status(state: StateManager, name: str) -> dict[str, Any] | None:
    """The execution state from the active topology master's HTTP API (None if unreachable)."""
    try:
        data: dict[str, Any] = tm_get(state, name, "/topologies/execution_state", timeout=3.0)
    except AdminError:
        return None
    return data


def run_state_command(state: StateManager, name: str, command: str, wait_s: float, *,
                      send: Callable[[StateManager, str, str], pb.AdminResponse] | None = None,
                      clock: Callable[[], float] = time.monotonic,
                      sleep: Callable[[float], None] = time.sleep) -> tuple[bool, str]:
    """activate/deactivate, then waits up to ``wait_s`` for the master to say the state is in
    effect on every stream manager. Returns (applied, what to print): a state left pending
    (a stream manager not registered) is a failure that says why."""
    send = send or admin_command
    want = "RUNNING" if command == "activate" else "PAUSED"
    resp = send(state, name, command)
    if not resp.ok:
        return False, resp.message
    doc: dict[str, Any] = json.loads(resp.status_json) if resp.status_json else {}
    deadline = clock() + wait_s
    while doc.get("pending_reason"):  # an older master sends no reason: it said what it did
        if doc.get("state") not in (None, want):
            return False, f"{resp.message}\n{command} of topology '{name}' overtaken: the state is now {doc['state']}"
        if clock() >= deadline:
            return False, (f"{resp.message}\n{command} of topology '{name}' not applied within {wait_s:g} s: "
                           f"{doc['pending_reason']}")
        sleep(min(0.5, max(0.0, deadline - clock())))
        try:
            doc = json.loads(send(state, name, "status").status_json or b"{}")
        except AdminError:
            continue  # a master failing over: ask again until the deadline
    if resp.message.endswith("; applied on every stream manager"):
        return True, resp.message
    return True, f"{resp.message}\n{command} of topology '{name}' applied on every stream manager"

