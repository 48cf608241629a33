"""Route lookup and refusal for framed connections (``net.Connection``).

An endpoint declares, once when it starts, which messages each peer role may send it
(``Routes``, built from ``on``, ``on_raw`` and ``relay``). A connection asks its ``Dispatcher``
for its peer role's table when the handshake proves that role, then looks each frame's type up
in that table itself (one dict lookup per frame: the hot path never calls in here). A type not
in the table is refused here: counted, logged at a bounded rate and the connection closed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from google.protobuf.message import Message

from heron_py.common.framing import MsgType
from heron_py.common.wire import RAW, TYPES, decode_as

if TYPE_CHECKING:  # an annotation only: net imports this module
    from heron_py.common.conn_admission import FailureLog
    from heron_py.common.net import Connection, Counters


def type_name(msg_type: int) -> str:
    try:
        return MsgType(msg_type).name
    except ValueError:
        return str(msg_type)


M = TypeVar("M", bound=Message)
# a route's handler: the connection and the whole frame (decoded by the route when typed)
FrameFn = Callable[["Connection", bytes], None]


@dataclass(frozen=True)
class Route:
    """One message a peer of one role may send: its handler takes the whole frame."""

    role: str
    msg_type: MsgType
    fn: FrameFn


def on(role: str, cls: type[M], fn: Callable[[Connection, M], None]) -> Route:
    """A protobuf message ``role`` may send, decoded (``wire.decode_as``) before ``fn`` sees it.
    Its message type is the one ``wire.TYPES`` registers ``cls`` under (as a send's is), so a
    route's class and type cannot disagree; a class not on the wire is refused at server start."""
    msg_type = _type_of(role, cls)

    def decoded(conn: Connection, frame: bytes) -> None:
        fn(conn, decode_as(cls, msg_type, frame, conn.peer_name))

    return Route(role, msg_type, decoded)


def on_raw(role: str, msg_type: MsgType, fn: FrameFn) -> Route:
    """A raw message (``wire.RAW``: batches, markers, reports) ``role`` may send: ``fn`` gets
    the frame as it came, with no decoding (the hot path: one dict lookup, then ``fn``)."""
    if msg_type not in RAW:
        raise TypeError(f"route {role}/{msg_type.name}: not a raw message type; use on() with its class")
    return Route(role, msg_type, fn)


def relay(role: str, cls: type[Message], fn: FrameFn) -> Route:
    """A protobuf message ``role`` may send that this endpoint passes on as it came (a stream
    manager relays an instance's CheckpointSaved to the master): not decoded here; ``fn`` gets
    the frame and decodes what it checks. Its type is ``cls``'s, as for ``on``."""
    return Route(role, _type_of(role, cls), fn)


def _type_of(role: str, cls: type[Message]) -> MsgType:
    """The message type ``wire.TYPES`` registers ``cls`` under; a class not on the wire is a
    programming error, raised when the routes are built."""
    msg_type = TYPES.get(cls)
    if msg_type is None:
        raise TypeError(f"route {role}/{cls.__name__}: not a wire message (heron_py/common/wire.py MESSAGES)")
    return msg_type


class Routes:
    """What each peer role may send to one endpoint, built once when it starts (Heron's stream
    manager installs its typed handlers per server the same way). A connection picks its
    role's table when its handshake ends; a frame whose type is not in it is refused
    generically: counted (``Counters.bad_frame_role``, ``__bad-frames/role``), logged at a
    bounded rate and the connection closed."""

    def __init__(self, endpoint: str, routes: Iterable[Route]) -> None:
        self.endpoint = endpoint  # named in the refusal's log line ("stmgr", "tmanager", ...)
        tables: dict[str, dict[int, FrameFn]] = {}
        for r in routes:
            table = tables.setdefault(r.role, {})
            if r.msg_type in table:
                raise ValueError(f"routes of {endpoint}: {r.role}/{r.msg_type.name} routed twice")
            table[int(r.msg_type)] = r.fn
        self._tables = tables

    def table(self, role: str) -> dict[int, FrameFn]:
        """The role's handlers by message type (empty for a role that may send nothing)."""
        return self._tables.get(role, {})


class Dispatcher:
    """One connection's routes: the table of the role its peer proved, and the refusal of a
    message that role may not send."""

    def __init__(self, routes: Routes, counters: Counters, failures: FailureLog) -> None:
        self.routes = routes
        self._counters = counters
        self._failures = failures

    def table(self, role: str) -> dict[int, FrameFn]:
        return self.routes.table(role)

    def refuse(self, conn: Connection, msg_type: int) -> None:
        """A message the peer's role may not send here: counted, one line (rate-limited: a
        hostile peer may repeat it at will) and the connection closed."""
        self._counters.bad_frames += 1
        self._counters.bad_frame_role += 1
        ident = conn.identity
        peer_id = ident.peer_id if ident is not None else ""
        role = conn.peer_role
        self._failures.warn("refused %s from %s (role %r, id %r): not a message a %s may send to the %s; "
                            "closing the connection", type_name(msg_type), conn.peer_name, role, peer_id,
                            role or "peer", self.routes.endpoint, kind="refused message", always_limit=True)
        conn.close(f"refused {type_name(msg_type)} from a {role}")
